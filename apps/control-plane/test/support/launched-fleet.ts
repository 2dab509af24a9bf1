/**
 * A fleet started by `tools/fleet/launch.mjs` itself (what `npm start`
 * runs), on a free port block and a temporary data directory, awaited
 * until it prints "Ctrl-C stops the fleet"; stopped by SIGTERM, and then
 * every process fleet.json names is killed by its PID (after a failed
 * start the launcher may be gone while its children live on).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freeFleetPortBase } from '@fencer/fleet/testing';
import { root } from './instances.js';

const LAUNCHER = path.join(root, 'tools/fleet/launch.mjs');

/** What these tests read of fleet.json. */
export interface FleetJson {
  lockService: string[];
  controlPlane: { urls: string[]; instances: { id: string; url: string; pid: number }[] };
  routers: { pid: number }[];
  proxies: { pid: number }[];
  cells: { id: string; replicas: { id: string; pid: number }[] }[];
}

export interface FleetShape {
  readonly cells: number;
  readonly replicas: number;
  readonly routers: number;
  readonly proxies: number;
  readonly controlPlanes: number;
}

export interface LaunchedFleet {
  readonly dir: string;
  readonly fleet: FleetJson;
  /** What the launcher printed so far. */
  output(): string;
  stop(): Promise<void>;
}

/** `npm start`'s fleet when no shape is given: 2 cells of 5 replicas, a router, 2 proxies, one control plane. */
const DEFAULT_SHAPE: FleetShape = { cells: 2, replicas: 5, routers: 1, proxies: 2, controlPlanes: 1 };

/**
 * Starts the launcher under a new folder named from `prefix`, with `shape`
 * (or with no shape flags at all: the launcher's own defaults) and
 * `extraArgs` (e.g. `--secure`); rejects after `upMs` or if it exits.
 */
export async function launchFleet(
  prefix: string,
  shape: FleetShape | undefined,
  upMs: number,
  extraArgs: readonly string[] = [],
): Promise<LaunchedFleet> {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const s = shape ?? DEFAULT_SHAPE;
  const portBase = await freeFleetPortBase(s.cells, s.replicas, s.routers, s.proxies, s.controlPlanes);
  const shapeArgs = shape
    ? [
        '--cells',
        shape.cells,
        '--replicas',
        shape.replicas,
        '--routers',
        shape.routers,
        '--proxies',
        shape.proxies,
        '--control-planes',
        shape.controlPlanes,
      ]
    : [];
  const argv = [LAUNCHER, ...shapeArgs.map(String), ...extraArgs, '--port-base', String(portBase), '--data-dir', path.join(dir, '.fencer')];
  const launcher = spawn(process.execPath, argv, {
    cwd: root,
    env: { ...process.env, FENCER_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let fleet: FleetJson | undefined;
  const stop = (): Promise<void> => stopLaunched(launcher, fleet, dir);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the fleet did not come up within ${upMs} ms:\n${out}`)), upMs);
      const check = (d: Buffer): void => {
        out += d.toString();
        if (!out.includes('Ctrl-C stops the fleet')) return;
        clearTimeout(timer);
        resolve();
      };
      launcher.stdout.on('data', check);
      launcher.stderr.on('data', check);
      launcher.once('exit', (code) => reject(new Error(`the launcher exited (${code}):\n${out}`)));
    });
    fleet = JSON.parse(readFileSync(path.join(dir, '.fencer', 'fleet.json'), 'utf8')) as FleetJson;
  } catch (err) {
    await stop();
    throw err;
  }
  return { dir, fleet, output: () => out, stop };
}

async function stopLaunched(launcher: ChildProcess, fleet: FleetJson | undefined, dir: string): Promise<void> {
  if (launcher.exitCode === null && launcher.signalCode === null) {
    const gone = new Promise((r) => launcher.once('exit', r));
    launcher.kill('SIGTERM');
    await gone;
  }
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
  if (!process.env['FENCER_KEEP_TEST_DATA']) rmSync(dir, { recursive: true, force: true });
}
