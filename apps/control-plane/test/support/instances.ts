/**
 * Control-plane processes for the process-level tests (failover, forged
 * peers): its build, a free port, whether an instance is alive, and stopping
 * them all (SIGTERM, then SIGKILL for any still running after a grace
 * period).
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The workspace's root, and the control plane's entry point the tests spawn. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
export const MAIN = path.join(root, 'apps/control-plane/dist/main.js');

/** Builds the control plane unless its entry point is there (a spec run alone on a fresh clone). */
export function ensureBuilt(): void {
  if (!existsSync(MAIN))
    execFileSync(path.join(root, 'node_modules/.bin/nx'), ['build', 'control-plane', '--output-style=static'], {
      cwd: root,
      stdio: 'pipe',
    });
}

export interface InstanceProcess {
  readonly id: string;
  child?: ChildProcess;
}

/** One instance of a meta group planned on free ports: its addresses, data directory, and the command line they make. */
export interface PlannedInstance {
  readonly id: string;
  readonly url: string;
  readonly peerPort: number;
  readonly metricsUrl: string;
  readonly dataDir: string;
  /** MAIN and the flags that place it (--id, --peers, --urls, --data-dir, --listen, --metrics); a test adds its own. */
  readonly argv: readonly string[];
}

/** A meta group of `ids` on free ports of 127.0.0.1, each with its data directory made under `dir`. */
export async function planGroup(dir: string, ids: readonly string[] = ['cp1', 'cp2', 'cp3']): Promise<PlannedInstance[]> {
  const ports = await Promise.all(ids.map(async () => ({ http: await freePort(), peer: await freePort(), metrics: await freePort() })));
  const peers = ids.map((id, n) => `${id}=127.0.0.1:${ports[n]!.peer}`).join(',');
  const urls = ids.map((id, n) => `${id}=http://127.0.0.1:${ports[n]!.http}`).join(',');
  return ids.map((id, n) => {
    const p = ports[n]!;
    const dataDir = path.join(dir, id);
    mkdirSync(dataDir, { recursive: true });
    return {
      id,
      url: `http://127.0.0.1:${p.http}`,
      peerPort: p.peer,
      metricsUrl: `http://127.0.0.1:${p.metrics}/metrics`,
      dataDir,
      argv: [
        MAIN,
        ...['--id', id, '--peers', peers, '--urls', urls, '--data-dir', dataDir],
        ...['--listen', `127.0.0.1:${p.http}`, '--metrics', `127.0.0.1:${p.metrics}`],
      ],
    };
  });
}

/** A port free on 127.0.0.1 now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Started, not exited, and its PID still there. */
export function alive(i: InstanceProcess): boolean {
  if (i.child === undefined || i.child.exitCode !== null || i.child.signalCode !== null) return false;
  try {
    process.kill(i.child.pid!, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to every running instance, then SIGKILL for any still running after `graceMs`; resolves once all exited. */
export async function stopInstances(instances: readonly InstanceProcess[], graceMs = 10_000): Promise<void> {
  const running = instances.filter(alive);
  const exits = running.map((i) => new Promise((r) => i.child!.once('exit', r)));
  for (const i of running) i.child!.kill('SIGTERM');
  const killer = setTimeout(() => running.filter(alive).forEach((i) => i.child!.kill('SIGKILL')), graceMs);
  await Promise.all(exits);
  clearTimeout(killer);
}
