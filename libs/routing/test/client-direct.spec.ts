/**
 * Goal: the client library's direct mode (decision 0015) learns through a
 * router which replica serves a namespace and calls it directly from then
 * on; it goes back through the router, and learns the new place, when the
 * replica answers NOT_LEADER (a leader change), NAMESPACE_NOT_HERE (a move)
 * or cannot be reached; with direct mode off every call goes through the
 * router, which names nobody.
 * Method: an in-process router (buildRouter) with a static routing table
 * in front of the client library's fake LockService nodes, and a
 * FencerClient whose only endpoint is the router. Each fake records the
 * calls it serves; the router counts the calls it answers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { FencerClient } from '@fencer/client';
import { FakeLockService } from '@fencer/client/testing';
import { buildRouter, StaticRoutingSource, type Router } from '../src/index.js';

const NAME = '/ls/ns/a';
let router: Router | undefined;
let client: FencerClient | undefined;
const fakes: FakeLockService[] = [];
afterEach(async () => {
  await client?.close();
  await router?.close();
  for (const f of fakes.splice(0)) await f.stop().catch(() => {});
  router = undefined;
  client = undefined;
});

type Cells = Record<string, string[]>;

function table(cells: Cells, cellOfNs: string, version: number): ConstructorParameters<typeof StaticRoutingSource>[0] {
  return {
    version,
    cells: new Map(Object.entries(cells).map(([id, replicas]) => [id, { id, replicas }])),
    routes: new Map([['ns', { namespace: 'ns', cell: cellOfNs, state: 'active' as const }]]),
  };
}

async function fakesN(n: number): Promise<FakeLockService[]> {
  const out = await Promise.all(Array.from({ length: n }, () => FakeLockService.start()));
  fakes.push(...out);
  return out;
}

async function start(cells: Cells, direct: boolean): Promise<StaticRoutingSource> {
  const source = new StaticRoutingSource(table(cells, 'cell-1', 1));
  router = buildRouter({ source, logger: pino({ level: 'silent' }) });
  const at = await router.listen('127.0.0.1:0');
  client = new FencerClient({ endpoints: [at], direct, backoffBaseMs: 5, backoffMaxMs: 20 });
  return source;
}

/** Calls the router answered (every method, every code). */
async function routerCalls(): Promise<number> {
  return (await router!.metrics.calls.get()).values.reduce((s, v) => s + v.value, 0);
}

const served = (f: FakeLockService): number => f.callsOf('getLock').length;

describe('client direct mode', () => {
  it('learns the serving replica through the router, then calls it directly', async () => {
    const [leader, follower] = await fakesN(2);
    await start({ 'cell-1': [leader!.address, follower!.address] }, true);
    await client!.getLock(NAME); // through the router, which names the leader
    expect(await routerCalls()).toBe(1);
    for (let i = 0; i < 5; i++) await client!.getLock(NAME);
    expect(await routerCalls()).toBe(1);
    expect(served(leader!)).toBe(6);
    expect(client!.directCalls).toEqual({ direct: 5, fallbacks: 0 });
    // A session's calls too: OpenSession by its namespace, Acquire and Release by its session id.
    const h = await client!.acquire(NAME, { waitMs: 0 });
    await h.release();
    expect(leader!.callsOf('acquire')).toHaveLength(1);
    expect(await routerCalls()).toBe(1);
  });

  it('NOT_LEADER from the replica (a leader change): back through the router, and direct to the new leader after', async () => {
    const [a, b] = await fakesN(2);
    await start({ 'cell-1': [a!.address, b!.address] }, true);
    await client!.getLock(NAME);
    await client!.getLock(NAME);
    expect(served(a!)).toBe(2);
    a!.notLeaderHint = b!.address; // a is deposed; b leads
    await client!.getLock(NAME); // direct to a: NOT_LEADER; through the router, which follows the hint to b
    expect(client!.directCalls!.fallbacks).toBe(1);
    const viaRouter = await routerCalls();
    await client!.getLock(NAME);
    await client!.getLock(NAME);
    expect(await routerCalls()).toBe(viaRouter);
    expect(served(b!)).toBe(3);
  });

  it("NAMESPACE_NOT_HERE (a move): back through the router, and direct to the namespace's new cell after", async () => {
    const [a, c] = await fakesN(2);
    const source = await start({ 'cell-1': [a!.address], 'cell-2': [c!.address] }, true);
    await client!.getLock(NAME);
    await client!.getLock(NAME);
    source.set(table({ 'cell-1': [a!.address], 'cell-2': [c!.address] }, 'cell-2', 2));
    a!.injectFault({ method: 'getLock', code: 'NAMESPACE_NOT_HERE' });
    await client!.getLock(NAME);
    expect(client!.directCalls!.fallbacks).toBe(1);
    const viaRouter = await routerCalls();
    await client!.getLock(NAME);
    expect(await routerCalls()).toBe(viaRouter);
    expect(served(c!)).toBe(2);
  });

  it('a replica that cannot be reached: back through the router, which finds the cell another way', async () => {
    const [a, b] = await fakesN(2);
    await start({ 'cell-1': [a!.address, b!.address] }, true);
    await client!.getLock(NAME);
    await a!.stop();
    await client!.getLock(NAME);
    expect(client!.directCalls!.fallbacks).toBe(1);
    const viaRouter = await routerCalls();
    await client!.getLock(NAME);
    expect(await routerCalls()).toBe(viaRouter);
    expect(served(b!)).toBe(2);
  });

  it('off by default: every call through the router', async () => {
    const [a] = await fakesN(1);
    await start({ 'cell-1': [a!.address] }, false);
    for (let i = 0; i < 3; i++) await client!.getLock(NAME);
    expect(await routerCalls()).toBe(3);
    expect(client!.directCalls).toBeUndefined();
  });
});
