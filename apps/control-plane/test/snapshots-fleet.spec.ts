/**
 * Goal: on the fleet `npm start` runs (its defaults: 2 cells of 5 replicas,
 * a router, 2 proxies, one control plane), a snapshot of a cell with live
 * locks reaches `done` with index, bytes, sha256 and a file:// location
 * under the fleet's data directory whose content matches them and whose
 * manifest says the same; a second one, after more writes, has a higher
 * index and lists first.
 * Method: tools/fleet/launch.mjs itself on a free port block and a
 * temporary data directory, awaited until it prints "Ctrl-C stops the
 * fleet". Locks are taken through the router with the client library
 * (auto-tenants places the namespace); the snapshots are asked for with
 * `fencer snapshots take` (the CLI as its own process, finding the control
 * plane in fleet.json) and listed with `fencer snapshots list --json`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient } from '@fencer/client';
import { freeFleetPortBase } from '@fencer/fleet/testing';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const LAUNCHER = path.join(root, 'tools/fleet/launch.mjs');
const FENCER = path.join(root, 'node_modules/.bin/fencer');

interface FleetJson {
  lockService: string[];
  controlPlane: { urls: string[]; instances: { pid: number }[] };
  routers: { pid: number }[];
  proxies: { pid: number }[];
  cells: { replicas: { pid: number }[] }[];
}
interface SnapshotBody {
  id: string;
  state: string;
  index: number;
  bytes: number;
  sha256: string;
  location: string;
}

let dir = '';
let launcher: ChildProcess | undefined;
let out = '';
let fleet: FleetJson | undefined;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-snapshots-fleet-'));
  const portBase = await freeFleetPortBase(2, 5, 1, 2, 1);
  launcher = spawn(process.execPath, [LAUNCHER, '--port-base', String(portBase), '--data-dir', path.join(dir, '.fencer')], {
    cwd: root,
    env: { ...process.env, FENCER_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the fleet did not come up within 300 s:\n${out}`)), 300_000);
    const check = (d: Buffer): void => {
      out += d.toString();
      if (out.includes('Ctrl-C stops the fleet')) {
        clearTimeout(timer);
        resolve();
      }
    };
    launcher!.stdout!.on('data', check);
    launcher!.stderr!.on('data', check);
    launcher!.once('exit', (code) => reject(new Error(`the launcher exited (${code}):\n${out}`)));
  });
  fleet = JSON.parse(readFileSync(path.join(dir, '.fencer', 'fleet.json'), 'utf8')) as FleetJson;
}, 360_000);

afterAll(async () => {
  if (launcher && launcher.exitCode === null && launcher.signalCode === null) {
    const gone = new Promise((r) => launcher!.once('exit', r));
    launcher.kill('SIGTERM');
    await gone;
  }
  // After a failed start the launcher may be gone while its children live on: stop them by PID.
  const pids = fleet
    ? [
        ...fleet.cells.flatMap((c) => c.replicas.map((r) => r.pid)),
        ...fleet.routers.map((r) => r.pid),
        ...fleet.proxies.map((p) => p.pid),
        ...fleet.controlPlane.instances.map((c) => c.pid),
      ]
    : [];
  for (const pid of pids.filter((p) => p > 0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already stopped by the launcher */
    }
  }
  if (dir && !process.env['FENCER_KEEP_TEST_DATA']) rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** `fencer …` as its own process in the fleet's directory, as a user's shell runs it. */
function fencer(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('FENCER_')));
    const child = spawn(process.execPath, [FENCER, ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, out: stdout, err: stderr }));
  });
}

function fileOf(location: string): Buffer {
  expect(location.startsWith('file://')).toBe(true);
  return readFileSync(fileURLToPath(location));
}

describe('snapshots on the npm start fleet', () => {
  it('a snapshot of a cell with live locks is done with a file:// object matching it; a second has a higher index and lists first', async () => {
    const client = new FencerClient({ endpoints: fleet!.lockService, retryBudgetMs: 60_000 });
    try {
      const held = await client.acquire('/ls/snapdemo/held');
      const tenant = (await (await fetch(`${fleet!.controlPlane.urls[0]}/v1/tenants/snapdemo`)).json()) as { cell: string };
      const first = await fencer(['snapshots', 'take', '--cell', tenant.cell, '--json', '--timeout', '120s']);
      expect(first.code, first.err).toBe(0);
      const a = JSON.parse(first.out) as SnapshotBody;
      expect(a).toMatchObject({ state: 'done' });
      expect(a.index).toBeGreaterThan(0);
      const bytes = fileOf(a.location);
      expect(bytes.length).toBe(a.bytes);
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(a.sha256);
      expect(fileURLToPath(a.location).startsWith(path.join(dir, '.fencer', 'snapshots', tenant.cell))).toBe(true);
      const manifest = JSON.parse(fileOf(a.location.replace(/\.snap$/, '.json')).toString()) as Record<string, unknown>;
      expect(manifest).toMatchObject({ cell: tenant.cell, index: a.index, bytes: a.bytes, sha256: a.sha256 });

      await (await client.acquire('/ls/snapdemo/more')).release();
      await held.release();
      const second = await fencer(['snapshots', 'take', '--cell', tenant.cell, '--json', '--timeout', '120s']);
      expect(second.code, second.err).toBe(0);
      const b = JSON.parse(second.out) as SnapshotBody;
      expect(b.index).toBeGreaterThan(a.index);
      const listed = await fencer(['snapshots', 'list', '--cell', tenant.cell, '--json']);
      // Newest first; the control plane's own scheduled snapshot of the cell (taken when it became leader) is older.
      const ids = (JSON.parse(listed.out) as { snapshots: SnapshotBody[] }).snapshots.map((s) => s.id);
      expect(ids[0]).toBe(b.id);
      expect(ids.indexOf(a.id)).toBe(1);
    } finally {
      await client.close();
    }
  }, 300_000);
});
