/**
 * Goal: a cell that lost every disk is rebuilt from its last snapshot in
 * S3, and fencing still holds (the Grant promise across restores,
 * docs/decisions/0014-snapshots-in-object-storage.md): every token the
 * restored cell grants exceeds the last token a fenced resource accepted
 * from the lost cell, also those granted after the snapshot; GetLock shows
 * the locks as of the snapshot; a watch from before the restore gets
 * COMPACTED (the watch hub's floor is the restored revision); and the new
 * leader gives every restored session a fresh TTL (a session whose last
 * heartbeat is older than its TTL still holds its lock when the restored
 * cell first answers, and expires one TTL later).
 * Method: real processes on 127.0.0.1: s3rver, a three-replica cell
 * (tools/fleet's startTestCell), and a control plane process uploading to
 * s3rver (--snapshot-store s3://…, credentials from the AWS SDK's standard
 * chain: the environment). Locks through the client library, one resource
 * fenced with its FencedResource. The snapshot is asked for with
 * POST /v1/cells/cell-1/snapshots; more grants follow; then every replica is
 * SIGKILLed and its data folder deleted, `fencer cell restore` (the CLI as a
 * process) builds folders for three new replicas (new ids and ports) from the
 * snapshot's s3:// location, and they start. Waits poll for the condition
 * they need with a deadline; none stands in for an event.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { FencedResource, FencerClient } from '@fencer/client';
import { CELL_NODE_MAIN, spawnReplica, stopAll, waitForControlPlane, waitForLeader, type ReplicaPlan } from '@fencer/fleet';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';
import { startS3rver, S3RVER_CREDENTIALS, type S3rverProcess } from '@fencer/object-store/testing';
import { lockservice } from '@fencer/protocol';
import { ensureBuilt, planGroup, root, stopInstances, type InstanceProcess } from './support/instances.js';

const FENCER = path.join(root, 'node_modules/.bin/fencer');
const TTL_MS = 2_000;
const AWS_ENV = { AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey };

let dir = '';
let s3: S3rverProcess;
let cell: TestCell;
const cp: InstanceProcess = { id: 'cp1' };
let cpUrl = '';
const restored: ReplicaPlan[] = [];
const restoredChildren: ChildProcess[] = [];

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-disaster-'));
  s3 = await startS3rver(path.join(dir, 's3rver'));
  cell = await startTestCell({ replicas: 3 });
  const cellsFile = path.join(dir, 'cells.json');
  writeFileSync(
    cellsFile,
    JSON.stringify({ cells: [{ id: 'cell-1', replicas: cell.replicas.map((r) => ({ id: r.id, grpc: r.grpc, admin: r.admin })) }] }),
  );
  const [plan] = await planGroup(path.join(dir, 'cp'), ['cp1']);
  cpUrl = plan!.url;
  cp.child = spawn(
    process.execPath,
    [
      ...plan!.argv,
      ...['--cells-file', cellsFile, '--snapshot-store', `s3://${s3.bucket}/fleet`, '--s3-endpoint', s3.endpoint, '--s3-path-style'],
      ...['--snapshot-interval-ms', '0', '--cell-poll-ms', '200'],
    ],
    { cwd: root, env: { ...process.env, ...AWS_ENV, FENCER_LOG_LEVEL: 'warn' }, stdio: 'ignore' },
  );
  await waitForControlPlane(cpUrl, 60_000);
}, 240_000);

afterAll(async () => {
  await stopAll(restoredChildren, 3_000);
  await stopInstances([cp]);
  await cell?.stop();
  await s3?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 120_000);

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Snapshot {
  id: string;
  state: string;
  index: number;
  location: string;
  error?: string;
}

async function snapshotNow(): Promise<Snapshot> {
  const posted = (await (await fetch(`${cpUrl}/v1/cells/cell-1/snapshots`, { method: 'POST' })).json()) as Snapshot;
  return until('the snapshot upload', async () => {
    const s = (await (await fetch(`${cpUrl}/v1/cells/cell-1/snapshots/${posted.id}`)).json()) as Snapshot;
    if (s.state === 'failed') throw new Error(`snapshot failed: ${s.error}`);
    return s.state === 'done' ? s : undefined;
  });
}

/** The CLI as its own process. */
function fencer(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [FENCER, ...args], {
      cwd: dir,
      env: { ...process.env, ...AWS_ENV },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => resolve({ code, out, err }));
  });
}

/** New replicas in the test cell's port block (ports base+4..6: startTestCell reserves its whole decade). */
function planRestored(dataDir: string): ReplicaPlan[] {
  const base = Number(cell.replicas[0]!.grpc.split(':')[1]) - 1;
  const members = [4, 5, 6].map((i) => ({ id: `cell-1-n${i}`, port: base + i }));
  const peers = members.map((m) => `${m.id}=127.0.0.1:${m.port}`).join(',');
  return members.map((m) => ({
    id: m.id,
    grpc: `127.0.0.1:${m.port}`,
    admin: `127.0.0.1:${m.port + 100}`,
    peer: `127.0.0.1:${m.port + 300}`,
    metrics: `http://127.0.0.1:${m.port + 200}/metrics`,
    dataDir: path.join(dataDir, m.id),
    argv: [
      process.execPath,
      CELL_NODE_MAIN,
      ...['--id', m.id, '--cell-id', 'cell-1', '--listen', `127.0.0.1:${m.port}`, '--admin-listen', `127.0.0.1:${m.port + 100}`],
      ...['--metrics-listen', `127.0.0.1:${m.port + 200}`, '--peer-listen', `127.0.0.1:${m.port + 300}`],
      ...['--data-dir', path.join(dataDir, m.id), '--peers', peers],
    ],
    env: { UV_USE_IO_URING: '0', FENCER_LOG_LEVEL: 'warn' },
    cwd: root,
    pid: 0,
  }));
}

/** Watch from `sinceRevision` on `address`: resolves with the refusal's lock-reason, or 'events' if it streamed. */
function watchFrom(address: string, name: string, sinceRevision: number): Promise<string> {
  const client = new lockservice.LockServiceClient(address, credentials.createInsecure());
  return new Promise((resolve) => {
    const call = client.watch({ name, prefix: false, sinceRevision }, new Metadata());
    call.on('data', () => {
      call.cancel();
      resolve('events');
    });
    call.on('error', (e: ServiceError) => {
      client.close();
      resolve(String(e.metadata?.get('lock-reason')[0] ?? e.details));
    });
  });
}

describe('disaster restore from S3', () => {
  it('rebuilds the cell from its snapshot: tokens only grow, state as of the snapshot, old watches COMPACTED, sessions get a fresh TTL', async () => {
    const fence = new FencedResource();
    const lost = new FencerClient({ endpoints: cell.endpoints, ttlMs: TTL_MS, retryBudgetMs: 5_000, gracePeriodMs: 0 });
    const held = await lost.acquire('/ls/demo/held');
    let res = await lost.acquire('/ls/demo/res');
    expect(fence.admit('/ls/demo/res', res.token)).toBe(true);
    const atSnapshot = { held: held.token, res: res.token, session: res.session.id };

    const snapshot = await snapshotNow();
    expect(snapshot.location).toMatch(new RegExp(`^s3://${s3.bucket}/fleet/cell-1/${snapshot.index}-\\d+\\.snap$`));

    // The lost cell goes on granting after the snapshot; the resource accepts each newer token.
    for (let i = 0; i < 5; i++) {
      await res.release();
      res = await lost.acquire('/ls/demo/res');
      expect(fence.admit('/ls/demo/res', res.token)).toBe(true);
    }
    const lastToken = fence.highestToken('/ls/demo/res');
    expect(lastToken).toBeGreaterThan(atSnapshot.res);

    // Disaster: every replica and its data.
    for (const r of cell.replicas) await cell.kill(r.id);
    const lostAtMs = performance.now();
    for (const r of cell.replicas) rmSync(r.dataDir, { recursive: true, force: true });
    await lost.close().catch(() => undefined);

    const restoreDir = path.join(dir, 'restored');
    restored.push(...planRestored(restoreDir));
    const run = await fencer([
      ...['cell', 'restore', '--from', snapshot.location, '--cell', 'cell-1', '--data-dir', restoreDir],
      ...['--replicas', restored.map((r) => `${r.id}=${r.grpc}`).join(','), '--s3-endpoint', s3.endpoint, '--s3-path-style'],
    ]);
    expect(run.code, run.err).toBe(0);
    expect(run.out).toMatch(/restored cell cell-1 from s3:\/\/.*\.json/);
    for (const r of restored) restoredChildren.push(spawnReplica(r));
    const leader = await waitForLeader(restored, 60_000);
    const answeredAtMs = performance.now();
    expect(leader.revisionBase).toBeGreaterThan(lastToken);
    expect(leader.members.map((m) => m.id).sort()).toEqual(restored.map((r) => r.id));

    const client = new FencerClient({ endpoints: restored.map((r) => r.grpc), ttlMs: TTL_MS, retryBudgetMs: 30_000 });
    try {
      // GetLock shows the locks as of the snapshot, held by a session whose last heartbeat is older than its TTL.
      const seen = await client.getLock('/ls/demo/res');
      expect(answeredAtMs - lostAtMs, 'the restored cell answered more than a TTL after the last heartbeat').toBeGreaterThan(TTL_MS);
      expect(seen.lock.holders.map((h) => [h.sessionId, h.token])).toEqual([[atSnapshot.session, atSnapshot.res]]);
      expect((await client.getLock('/ls/demo/held')).lock.holders.map((h) => h.token)).toEqual([atSnapshot.held]);

      // A watch from before the restore: the restored cell has no history below its restored revision.
      expect(await watchFrom(restored[0]!.grpc, '/ls/demo/res', lastToken)).toBe('COMPACTED');

      // The restored session expires one TTL after the new leader began; then the resource takes only newer tokens.
      const next = await client.acquire('/ls/demo/res', { waitMs: 20_000 });
      expect(next.token).toBeGreaterThan(lastToken);
      expect(fence.admit('/ls/demo/res', next.token)).toBe(true);
      const other = await client.acquire('/ls/demo/other');
      expect(other.token).toBeGreaterThan(lastToken);
    } finally {
      await client.close();
    }
  }, 300_000);
});
