/**
 * Goal: the meta group keeps every acknowledged write through the loss of its
 * leader: three control-plane processes,
 * kill -9 of their leader while tenants are being created; every tenant
 * answered 201 exists afterwards (also on the killed instance once it
 * restarts from its WAL), routing versions strictly increase, and no
 * namespace is owned by two cells.
 * Method: two real managed cells (tools/fleet's startTestCell, one replica
 * each, --managed so they claim nothing on their own) and three real
 * control-plane processes (apps/control-plane/dist/main.js) on 127.0.0.1.
 * One client creates 24 tenants, alternating cells, each with its own
 * Idempotency-Key, retrying on any instance until it gets 201; after the 8th
 * it SIGKILLs the leader. Every routing version the client reads is checked
 * against the one before. Afterwards each namespace is opened on both cells
 * with OpenSession: exactly one (the routed one) accepts it, the other says
 * NAMESPACE_NOT_HERE. Last, one instance gets SIGTERM and must exit 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, ensureBuilt, planGroup, stopInstances } from './support/instances.js';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';

const TENANTS = 24;
const KILL_AFTER = 8;

interface Instance {
  readonly id: string;
  readonly url: string;
  readonly argv: string[];
  child?: ChildProcess;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of several shapes (health, tenants, routing), each read by the assertions that follow
async function http(url: string, init: RequestInit = {}): Promise<{ status: number; body: any } | undefined> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  } catch {
    return undefined;
  }
}

let cells: TestCell[] = [];
let dir = '';
const instances: Instance[] = [];

function startInstance(i: Instance): void {
  const log = openSync(path.join(dir, `${i.id}.log`), 'a');
  i.child = spawn(process.execPath, i.argv, { stdio: ['ignore', log, log], env: { ...process.env, FENCER_LOG_LEVEL: 'warn' } });
}

async function leaderOf(timeoutMs: number): Promise<Instance> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    for (const i of instances.filter(alive)) {
      const h = await http(`${i.url}/v1/health`);
      if (h?.status === 200 && h.body?.role === 'leader') return i;
    }
    await sleep(100);
  }
  throw new Error(`no control-plane leader within ${timeoutMs} ms`);
}

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-cp-failover-'));
  cells = [
    await startTestCell({ replicas: 1, extraArgs: ['--managed'] }),
    await startTestCell({ replicas: 1, extraArgs: ['--managed', '--cell-id', 'cell-2'] }),
  ];
  const cellsFile = path.join(dir, 'cells.json');
  writeFileSync(
    cellsFile,
    JSON.stringify({
      cells: cells.map((c, n) => ({ id: `cell-${n + 1}`, replicas: c.replicas.map((r) => ({ id: r.id, grpc: r.grpc, admin: r.admin })) })),
    }),
  );
  for (const p of await planGroup(dir))
    instances.push({ id: p.id, url: p.url, argv: [...p.argv, '--cells-file', cellsFile, '--cell-poll-ms', '200'] });
  instances.forEach(startInstance);
  await leaderOf(30_000);
}, 120_000);

afterAll(async () => {
  await stopInstances(instances);
  for (const c of cells) await c.stop();
  if (dir && !process.env['FENCER_KEEP_TEST_DATA']) rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** OpenSession in `namespace` on a one-replica cell: 'ok', or the lock-reason of the refusal. */
function openOn(address: string, namespace: string): Promise<string> {
  const client = new lockservice.LockServiceClient(address, credentials.createInsecure());
  return new Promise((resolve) => {
    client.openSession(
      { clientId: 'failover-test', ttlMs: 10_000, namespace },
      new Metadata(),
      { deadline: Date.now() + 5_000 },
      (err: ServiceError | null) => {
        client.close();
        resolve(err ? String(err.metadata?.get('lock-reason')[0] ?? err.details) : 'ok');
      },
    );
  });
}

describe('three control-plane instances, kill -9 of the leader while tenants are created', () => {
  it('keeps every tenant answered 201, routing versions only grow, and each namespace has one owner cell', async () => {
    const created = new Map<string, string>();
    let lastVersion = -1;
    const versions: number[] = [];
    let killed: Instance | undefined;
    const observeRouting = async (): Promise<void> => {
      for (const i of instances.filter(alive)) {
        const r = await http(`${i.url}/v1/routing`);
        if (r?.status !== 200) continue;
        expect(r.body.version, `routing version read from ${i.id} went back`).toBeGreaterThanOrEqual(lastVersion);
        if (r.body.version > lastVersion) versions.push(r.body.version);
        lastVersion = r.body.version;
      }
    };
    for (let t = 0; t < TENANTS; t++) {
      if (t === KILL_AFTER) {
        killed = await leaderOf(30_000);
        const gone = new Promise((r) => killed!.child!.once('exit', r));
        killed.child!.kill('SIGKILL');
        await gone;
      }
      const namespace = `tenant-${t}`;
      const cell = `cell-${(t % 2) + 1}`;
      const until = Date.now() + 60_000;
      for (let attempt = 0; !created.has(namespace); attempt++) {
        if (Date.now() > until) throw new Error(`${namespace} was never created`);
        const live = instances.filter(alive);
        const target = live[attempt % live.length]!;
        const r = await http(`${target.url}/v1/tenants`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `create-${namespace}` },
          body: JSON.stringify({ namespace, cell }),
        });
        if (r?.status === 201) created.set(namespace, r.body.cell);
        else if (r !== undefined && r.status < 500) throw new Error(`${namespace}: ${r.status} ${JSON.stringify(r.body)}`);
        else await sleep(100);
      }
      await observeRouting();
    }
    expect(killed).toBeDefined();
    expect(created.size).toBe(TENANTS);
    for (let k = 1; k < versions.length; k++) expect(versions[k]!).toBeGreaterThan(versions[k - 1]!);

    // The killed instance restarts from its WAL and catches up.
    startInstance(killed!);
    const until = Date.now() + 60_000;
    const survivors = instances.filter((i) => i !== killed);
    for (const i of [...survivors, killed!]) {
      let tenants: { namespace: string; cell: string }[] = [];
      while (Date.now() < until) {
        const r = await http(`${i.url}/v1/tenants`);
        tenants = r?.status === 200 ? r.body.tenants : [];
        if (tenants.length >= TENANTS) break;
        await sleep(200);
      }
      expect(new Map(tenants.map((x) => [x.namespace, x.cell])), `tenants seen through ${i.id}`).toEqual(created);
    }
    const routing = (await http(`${survivors[0]!.url}/v1/routing`))!.body;
    expect(routing.version).toBe(TENANTS);

    // Cells own exactly what the control plane says.
    for (const [namespace, cell] of created) {
      const answers = await Promise.all(cells.map((c) => openOn(c.replicas[0]!.grpc, namespace)));
      const owners = answers.map((a, n) => (a === 'ok' ? `cell-${n + 1}` : undefined)).filter(Boolean);
      expect(owners, `${namespace}: ${answers.join(' / ')}`).toEqual([cell]);
      expect(answers.filter((a) => a !== 'ok')).toEqual(['NAMESPACE_NOT_HERE']);
    }

    // SIGTERM stops an instance cleanly.
    const stopping = survivors[0]!;
    const exited = new Promise<[number | null, string | null]>((r) => stopping.child!.once('exit', (code, signal) => r([code, signal])));
    stopping.child!.kill('SIGTERM');
    expect(await exited).toEqual([0, null]);
  }, 240_000);
});
