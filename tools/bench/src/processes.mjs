// Processes the benchmark starts: free port ranges below the ephemeral
// range, waiting for a listener, and stopping children by their own PID.
import net from 'node:net';
import { sleep } from './measure.mjs';

/** Linux's ephemeral ports (ip_local_port_range) start here: outgoing connections take ports from 32768 up. */
const EPHEMERAL_PORTS_FROM = 32_768;
/** How often waitForPort tries to connect. */
const PORT_POLL_MS = 100;

/** Resolves when something accepts TCP connections on host:port, or rejects after timeoutMs. */
export async function waitForPort(port, timeoutMs, host = '127.0.0.1') {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host, port }, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
    await sleep(PORT_POLL_MS);
  }
}

/** True when nothing listens on 127.0.0.1:port (a quick bind test). */
function portFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * Picks a base so that base+0 .. base+span-1 are all free, from `preferred`
 * up to the ephemeral range: a server restarted there (the failover
 * scenario) could find its port taken by some process's outgoing connection.
 */
export async function freePortBase(preferred, span) {
  for (let base = preferred; base + span <= EPHEMERAL_PORTS_FROM; base += span + 7) {
    let free = true;
    for (let p = base; p < base + span && free; p++) free = await portFree(p);
    if (free) return base;
  }
  throw new Error(`no free port range of ${span} near ${preferred}`);
}

export function alive(child) {
  return child !== undefined && child.exitCode === null && child.signalCode === null;
}

/** Stops children that this run started: SIGTERM, then SIGKILL after graceMs (by their own PID). */
export async function stopChildren(children, graceMs = 5000) {
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          if (!alive(child)) return resolve();
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

/** Kills one child with SIGKILL and resolves once it is gone. */
export function killHard(child) {
  return new Promise((resolve) => {
    if (!alive(child)) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

/**
 * kill -9 of `system`'s current leader (any system with leader() → { id }
 * and `children` by id); remembers it for restartKilled(). Resolves with the
 * time of the kill.
 */
export async function killLeaderOf(system) {
  const { id } = await system.leader();
  const t = performance.now();
  await killHard(system.children.get(id));
  system.killed = id;
  return { killedAtMs: t, id };
}

/** Every list of systems handed to stopOnSignal, so one signal stops them all. */
const startedLists = [];
let signalled = false;

function onSignal(sig) {
  if (signalled) return;
  signalled = true;
  console.error(`\n${sig}: stopping everything this run started`);
  void Promise.all(startedLists.map((stopAll) => stopAll())).finally(() => process.exit(130));
}

/**
 * Stops every system in `started` once: when the returned function is
 * called, or on SIGINT/SIGTERM (every list registered here), so a run cut
 * short leaves no server behind.
 */
export function stopOnSignal(started) {
  let stopping;
  const stopAll = () =>
    (stopping ??= Promise.all(started.map((s) => s.stop().catch((e) => console.error(`stopping ${s.key}: ${e.message}`)))));
  if (startedLists.length === 0) for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, onSignal);
  startedLists.push(stopAll);
  return stopAll;
}
