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
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerClient } from '@fencer/client';
import { type FleetJson, type LaunchedFleet, launchFleet } from './support/launched-fleet.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const FENCER = path.join(root, 'node_modules/.bin/fencer');

interface SnapshotBody {
  id: string;
  state: string;
  index: number;
  bytes: number;
  sha256: string;
  location: string;
}

let dir = '';
let launched: LaunchedFleet | undefined;
let fleet: FleetJson | undefined;

beforeAll(async () => {
  launched = await launchFleet('fencer-snapshots-fleet-', undefined, 300_000);
  dir = launched.dir;
  fleet = launched.fleet;
}, 360_000);

afterAll(async () => {
  await launched?.stop();
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
