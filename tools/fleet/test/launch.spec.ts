/**
 * Goal: the launcher behind `npm start` writes fleet.json only once every
 * process it describes serves, gives the control plane its own cells file,
 * and on SIGTERM removes fleet.json and leaves no process behind.
 * Method: tools/fleet/launch.mjs itself with 2 cells of 3 replicas, 1
 * router, 1 proxy and 1 control plane on a free port block and a temporary
 * data directory that holds a stale fleet.json from an earlier run. The
 * file is watched (polled every 10 ms) from the launcher's start: the stale
 * one must go first, and the moment the new one appears, one attempt each
 * (no retry) must find the control plane answering GET /v1/routing, the
 * router answering a contract call (GetLock), the proxy accepting
 * connections and every replica answering admin Status. Then SIGTERM: the
 * launcher exits 0, fleet.json is gone, and no pid it listed is alive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { adminClient, status as adminStatus } from '../fleet.mjs';
import { freeFleetPortBase } from '../test-cell.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const LAUNCHER = path.join(root, 'tools/fleet/launch.mjs');
const POLL_MS = 10;
const FLEET_UP_MS_MAX = 240_000;
const STOP_MS_MAX = 60_000;
const STALE = '{"stale": true}\n';

interface Described {
  id: string;
  grpc: string;
  pid: number;
}
interface FleetJson {
  lockService: string[];
  routers: Described[];
  proxies: Described[];
  controlPlane: { urls: string[]; instances: { id: string; url: string; pid: number }[] };
  cells: { id: string; replicas: (Described & { admin: string })[] }[];
}

let dir = '';
let launcher: ChildProcess | undefined;
let output = '';
let pids: number[] = [];

afterAll(async () => {
  if (launcher && launcher.exitCode === null && launcher.signalCode === null) {
    const gone = new Promise((r) => launcher!.once('exit', r));
    launcher.kill('SIGKILL');
    await gone;
  }
  // Only after a failed test: the children of a SIGKILLed launcher outlive it.
  for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
  if (dir && !process.env['FENCER_KEEP_TEST_DATA']) rmSync(dir, { recursive: true, force: true });
}, 60_000);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `probe` every POLL_MS until it returns a value; rejects when the launcher exits first or at the deadline. */
async function until<T>(probe: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (launcher?.exitCode !== null || launcher?.signalCode !== null)
      throw new Error(`${what}: the launcher exited first; output:\n${output}`);
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms; output:\n${output}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

function readFleet(file: string): FleetJson | undefined {
  if (!existsSync(file)) return undefined;
  const text = readFileSync(file, 'utf8');
  return text === STALE ? undefined : (JSON.parse(text) as FleetJson);
}

/** One GetLock through the router, no retry and no wait for readiness: the gRPC status code it ends with. */
function getLockCode(address: string): Promise<number> {
  const client = new lockservice.LockServiceClient(address, credentials.createInsecure());
  return new Promise((resolve) =>
    client.getLock({ name: '/ls/probe/x' }, new Metadata(), { deadline: Date.now() + 20_000 }, (err: ServiceError | null) => {
      client.close();
      resolve(err ? err.code : grpcStatus.OK);
    }),
  );
}

function accepts(address: string): Promise<boolean> {
  const at = address.lastIndexOf(':');
  return new Promise((resolve) => {
    const s = connect(Number(address.slice(at + 1)), address.slice(0, at));
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

async function replicaAnswers(admin: string): Promise<boolean> {
  const client = adminClient(admin);
  try {
    return (await adminStatus(client, 5_000)) !== undefined;
  } finally {
    client.close();
  }
}

describe('tools/fleet/launch.mjs', () => {
  it('writes fleet.json only when every process serves, and stops cleanly on SIGTERM', async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'fencer-launch-'));
    const dataDir = path.join(dir, '.fencer');
    const fleetFile = path.join(dataDir, 'fleet.json');
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(fleetFile, STALE);
    const portBase = await freeFleetPortBase(2, 3, 1, 1, 1);
    const args = ['--cells', '2', '--replicas', '3', '--routers', '1', '--proxies', '1', '--control-planes', '1'];
    launcher = spawn(process.execPath, [LAUNCHER, ...args, '--port-base', String(portBase), '--data-dir', dataDir], {
      cwd: root,
      env: { ...process.env, FENCER_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    launcher.stdout!.on('data', (d: Buffer) => void (output += d.toString()));
    launcher.stderr!.on('data', (d: Buffer) => void (output += d.toString()));

    await until(() => (existsSync(fleetFile) ? undefined : true), 'the stale fleet.json going', 30_000);
    const fleet = await until(() => readFleet(fleetFile), 'fleet.json appearing', FLEET_UP_MS_MAX);
    pids = [
      ...fleet.cells.flatMap((c) => c.replicas.map((r) => r.pid)),
      ...fleet.routers.map((r) => r.pid),
      ...fleet.proxies.map((p) => p.pid),
      ...fleet.controlPlane.instances.map((c) => c.pid),
    ];
    // One attempt each, at once: nothing may still be starting.
    const [routing, routerCodes, proxiesUp, replicasUp] = await Promise.all([
      fetch(new URL('/v1/routing', fleet.controlPlane.urls[0])),
      Promise.all(fleet.routers.map((r) => getLockCode(r.grpc))),
      Promise.all(fleet.proxies.map((p) => accepts(p.grpc))),
      Promise.all(fleet.cells.flatMap((c) => c.replicas.map((r) => replicaAnswers(r.admin)))),
    ]);
    expect(routing.status).toBe(200);
    // A lock nobody holds: an answer (OK, or NOT_FOUND before the auto-created tenant's route is followed), never UNAVAILABLE.
    for (const code of routerCodes) expect([grpcStatus.OK, grpcStatus.NOT_FOUND]).toContain(code);
    expect(proxiesUp).toEqual([true]);
    expect(replicasUp).toEqual(new Array(6).fill(true));
    expect(pids.filter((p) => p > 0)).toHaveLength(6 + 1 + 1 + 1);
    expect(fleet.lockService).toEqual(fleet.routers.map((r) => r.grpc));

    const cells = JSON.parse(readFileSync(path.join(dataDir, 'control-plane', 'cells.json'), 'utf8')) as { cells: { id: string }[] };
    expect(cells.cells.map((c) => c.id)).toEqual(['cell-1', 'cell-2']);

    const exited = new Promise<number | null>((resolve) => launcher!.once('exit', (code) => resolve(code)));
    launcher.kill('SIGTERM');
    const code = await Promise.race([
      exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit within ${STOP_MS_MAX} ms:\n${output}`)), STOP_MS_MAX)),
    ]);
    expect(code).toBe(0);
    expect(existsSync(fleetFile)).toBe(false);
    expect(pids.filter(alive)).toEqual([]);
  });
});
