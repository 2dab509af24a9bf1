// Lock-cycle loads, written once against the session interface every
// system offers (openSession → lock / tryLock / unlock / read / close), so
// every system meets the same load: acquire+release on distinct names
// (uncontended), on one name (contended: FIFO handoffs), try-locks on a
// held name, and linearizable reads of a held lock's token.
import { closedLoop } from './closed-loop.mjs';
import { nowMs, pool } from '../measure.mjs';

/** Sessions are opened and closed this many at a time. */
const SESSION_OPEN_WIDTH = 64;
/** TTL of the load's sessions: longer than any measured window. */
const SESSION_TTL_S = 300;

function openSessions(system, n) {
  return pool(n, SESSION_OPEN_WIDTH, () => system.openSession(SESSION_TTL_S));
}

async function closeSessions(sessions) {
  await pool(sessions.length, SESSION_OPEN_WIDTH, (i) => sessions[i].close());
}

/** Runs `body(sessions)` with `n` fresh sessions, closing them after. */
async function withSessions(system, n, body) {
  const sessions = await openSessions(system, n);
  try {
    return await body(sessions);
  } finally {
    await closeSessions(sessions);
  }
}

/** Runs `body(held)` while one extra session holds `name`. */
async function withHeldLock(system, name, body) {
  const holder = await system.openSession(SESSION_TTL_S);
  const held = await holder.lock(name);
  try {
    return await body(held);
  } finally {
    await holder.unlock(held).catch(() => {});
    await holder.close();
  }
}

/** One acquire and release of `name` by `session`: the acquire's latency, and the whole cycle's, in ms. */
export async function cycle(session, name) {
  const t0 = nowMs();
  const h = await session.lock(name);
  const latencyMs = nowMs() - t0;
  await session.unlock(h);
  return { latencyMs, cycleMs: nowMs() - t0 };
}

/** Acquire+release cycles, client i on its own name. */
export function uncontended(system, clients, opts) {
  return withSessions(system, clients, (sessions) =>
    closedLoop(system, clients, opts, (i) => cycle(sessions[i], system.lockName(`u${clients}/c${i}`))),
  );
}

/** Acquire+release cycles, every client on one name: the latency is the wait for the grant. */
export async function contended(system, clients, opts) {
  const name = system.lockName('contended/one');
  const r = await withSessions(system, clients, (sessions) => closedLoop(system, clients, opts, (i) => cycle(sessions[i], name)));
  return { ...r, note: 'latency = wait for the grant' };
}

/** Try-locks of a name another session holds; any grant is a bug and is reported. */
export function tryLockStorm(system, clients, opts) {
  let granted = 0;
  return withHeldLock(system, system.lockName('storm/held'), () =>
    withSessions(system, clients, async (sessions) => {
      const r = await closedLoop(system, clients, opts, async (i) => {
        const t0 = nowMs();
        const h = await sessions[i].tryLock(system.lockName('storm/held'));
        if (h) {
          granted++;
          await sessions[i].unlock(h);
        }
        return nowMs() - t0;
      });
      return granted > 0 ? { ...r, note: `${granted} try-locks were GRANTED on a held lock (a bug)` } : r;
    }),
  );
}

/** Linearizable reads of a held lock's token. */
export function reads(system, clients, opts) {
  return withHeldLock(system, system.lockName('reads/held'), (held) =>
    withSessions(system, clients, (sessions) =>
      closedLoop(system, clients, opts, async (i) => {
        const t0 = nowMs();
        await sessions[i].read(held);
        return nowMs() - t0;
      }),
    ),
  );
}
