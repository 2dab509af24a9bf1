/**
 * Control-plane processes for the process-level tests (failover, forged
 * peers): a free port, whether an instance is alive, and stopping them all
 * (SIGTERM, then SIGKILL for any still running after a grace period).
 */
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export interface InstanceProcess {
  readonly id: string;
  child?: ChildProcess;
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
