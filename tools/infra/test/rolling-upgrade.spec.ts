/**
 * Goal: a fleet upgraded as docs/operations.md's rolling-upgrade procedure
 * says (one process at a time, each ready again before the next; in each
 * cell the followers first and the leader last; control-plane instances,
 * routers and proxies one at a time too) serves its clients throughout: no
 * client call fails beyond the SDK's retries, no session expires, the
 * fencing tokens of every lock keep growing, and each cell changes leader
 * at most once (when its leader restarts). A leader given SIGTERM hands
 * leadership to a follower itself (apps/cell-node/src/main.ts, build.ts):
 * its log says the transfer moved, and the cell's next leader is the one
 * it named, one term later.
 * Method: a test fleet (tools/fleet) of two three-replica cells, a meta
 * group of three control-plane instances, two routers and two proxies on
 * 127.0.0.1; four SDK clients (both routers, both proxies) take locks in a
 * loop in two namespaces; every replica's status is sampled every 100 ms
 * for the leader of each term. Each process gets SIGTERM (exit 0 expected),
 * is started again from its plan with its data, and must answer its
 * readiness probe (/readyz; the control plane's /v1/health) and the load
 * must make progress before the next one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient } from '@fencer/client';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';
import { LeaderWatch, LockLoad, answersOk, lastLogLine, logOf, restartOne } from './rolling.js';

const NAMESPACES = ['roll-a', 'roll-b'];
/** Lock names per namespace: few enough that clients queue for the same locks. */
const NAMES_PER_NAMESPACE = 4;
const WORKERS_PER_CLIENT = 2;
/** Grants the load must make after each restart before the next one starts. */
const PROGRESS_GRANTS = 5;
/** One process's exit, restart, readiness or progress, on a loaded machine. */
const STEP_TIMEOUT_MS = 90_000;
const TEST_TIMEOUT_MS = 900_000;

let fleet: TestFleet;
let clients: FencerClient[] = [];
let load: LockLoad;
let watch: LeaderWatch;
const exitCodes = new Map<string, number | null>();
/** Each restart's process and wall-clock span, to tell which one a session event fell in. */
const steps: { id: string; startMs: number; endMs: number }[] = [];
const handoffs: { cell: string; from: string; term: number; to: unknown; moved: unknown; next: string; nextTerm: number }[] = [];

beforeAll(async () => {
  // The handoff is logged at info; the test fleet logs warn and above unless told.
  const level = process.env['FENCER_LOG_LEVEL'];
  process.env['FENCER_LOG_LEVEL'] = 'info';
  try {
    fleet = await startTestFleet({
      cells: 2,
      replicas: 3,
      routers: 2,
      proxies: 2,
      controlPlanes: 3,
      routes: { [NAMESPACES[0]!]: 'cell-1', [NAMESPACES[1]!]: 'cell-2' },
    });
  } finally {
    if (level === undefined) delete process.env['FENCER_LOG_LEVEL'];
    else process.env['FENCER_LOG_LEVEL'] = level;
  }
  const names = NAMESPACES.flatMap((ns) => Array.from({ length: NAMES_PER_NAMESPACE }, (_, i) => `/ls/${ns}/job-${i}`));
  clients = [0, 1, 2, 3].map(
    (i) =>
      new FencerClient({
        endpoints: [...fleet.routerEndpoints.slice(i % 2), ...fleet.routerEndpoints.slice(0, i % 2)],
        proxies: [...fleet.proxyEndpoints.slice(i % 2), ...fleet.proxyEndpoints.slice(0, i % 2)],
        clientId: `rolling-${i}`,
      }),
  );
  load = new LockLoad(clients, names);
  watch = new LeaderWatch(fleet);
  watch.start();
  load.start(WORKERS_PER_CLIENT);
  await load.progressed(20, STEP_TIMEOUT_MS);
}, 300_000);

afterAll(async () => {
  watch?.stop();
  await load?.stop();
  await Promise.all(clients.map((c) => c.close()));
  await fleet?.stop();
});

const readyz = (metricsUrl: string) => () => answersOk(metricsUrl.replace(/\/metrics$/, '/readyz'));

async function restartStep(id: string, ready: () => Promise<true | undefined>): Promise<void> {
  const startMs = Date.now();
  exitCodes.set(id, await restartOne(fleet, id, ready, STEP_TIMEOUT_MS));
  await load.progressed(PROGRESS_GRANTS, STEP_TIMEOUT_MS);
  steps.push({ id, startMs, endMs: Date.now() });
}

/** A session event as "jeopardy roll-a during cell-1-r2" (or "between restarts"). */
function describeEvent(e: { event: string; namespace: string; atMs: number }): string {
  const step = steps.find((s) => e.atMs >= s.startMs && e.atMs <= s.endMs);
  return `${e.event} ${e.namespace} ${step ? `during ${step.id}` : 'between restarts'}`;
}

/** The control plane's meta group: followers first, then the instance that leads. */
async function upgradeControlPlanes(): Promise<void> {
  const leader = await fleet.metaLeader();
  const order = [...fleet.controlPlanes.filter((c) => c.id !== leader.id), leader];
  for (const cp of order) {
    await restartStep(cp.id, () => answersOk(new URL('/v1/health', cp.url).href));
    await fleet.metaLeader();
  }
}

/** One cell: its followers one at a time, then its leader, whose SIGTERM hands leadership on. */
async function upgradeCell(cellId: string): Promise<void> {
  const cell = fleet.plan.find((c) => c.id === cellId)!;
  const leader = await fleet.leaderOf(cellId);
  for (const r of cell.replicas.filter((r) => r.id !== leader.nodeId)) await restartStep(r.id, readyz(r.metrics));
  const stillLeading = await fleet.leaderOf(cellId);
  const replica = cell.replicas.find((r) => r.id === stillLeading.nodeId)!;
  await restartStep(replica.id, readyz(replica.metrics));
  const handoff = lastLogLine(logOf(fleet, replica.id), 'leadership transfer before shutdown');
  const next = await fleet.leaderOf(cellId);
  handoffs.push({
    cell: cellId,
    from: replica.id,
    term: stillLeading.term,
    to: handoff?.['to'],
    moved: handoff?.['moved'],
    next: next.nodeId,
    nextTerm: next.term,
  });
}

describe('rolling upgrade of a fleet under load', () => {
  it(
    'control planes, cells (leaders last), routers and proxies restarted one at a time: no client call fails, one leader change per cell, the SIGTERM handoff',
    async () => {
      await upgradeControlPlanes();
      for (const cell of fleet.plan) await upgradeCell(cell.id);
      for (const r of fleet.routers) await restartStep(r.id, readyz(r.metrics));
      for (const p of fleet.proxies) await restartStep(p.id, readyz(p.metrics));
      await load.progressed(PROGRESS_GRANTS, STEP_TIMEOUT_MS);
      watch.stop();
      await load.stop();

      expect.soft(load.failures, 'client calls that failed beyond their retries').toEqual([]);
      expect.soft(load.sessionEvents.filter((e) => e.event === 'expired').map(describeEvent), 'sessions expired').toEqual([]);
      expect.soft(load.tokensNotGrowing(), 'fencing tokens that did not grow').toEqual([]);
      expect
        .soft(
          [...exitCodes].filter(([, code]) => code !== 0),
          'processes that did not exit 0 on SIGTERM',
        )
        .toEqual([]);
      for (const cell of fleet.plan) {
        expect.soft(watch.termsWithTwoLeaders(cell.id), `${cell.id}: terms with two leaders`).toEqual([]);
        expect
          .soft(watch.leaderSequence(cell.id).length, `${cell.id}: leaders ${watch.leaderSequence(cell.id).join(' -> ')}`)
          .toBeLessThanOrEqual(2);
      }
      for (const h of handoffs) {
        expect.soft(h.moved, `${h.cell}: ${h.from}'s handoff before shutdown`).toBe(true);
        expect.soft(h.next, `${h.cell}: the leader after ${h.from}'s SIGTERM`).toBe(h.to);
        expect.soft(h.nextTerm, `${h.cell}: the term after ${h.from}'s handoff`).toBe(h.term + 1);
      }
      console.log(
        `rolling upgrade: ${load.grants} grants, ${load.sessionEvents.length} session events (${load.sessionEvents.map(describeEvent).join(', ') || 'none'}); ` +
          handoffs.map((h) => `${h.cell} ${h.from} -> ${h.next} (term ${h.term} -> ${h.nextTerm})`).join('; '),
      );
    },
    TEST_TIMEOUT_MS,
  );
});
