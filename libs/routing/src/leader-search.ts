/**
 * The search for a cell's new leader after the connection to its leader was
 * lost (docs/decisions/0021-crash-detection-by-the-transport.md): a lost
 * connection most likely means the leader's process died, and its followers
 * elect a new one within a few round trips. Rather than wait out its
 * backoff, the router asks every replica at once, and again every
 * LEADER_SEARCH_PAUSE_MS, until one answers: a replica that serves the
 * probe (a linearizable read, so it is the leader and its term's first
 * entry has committed) is the leader; a follower's NOT_LEADER naming
 * another replica than the lost one names it. The lost replica is asked as
 * well: a connection may reset while its process lives on and still leads
 * (its followers then keep naming it, and it answers). Calls that lose the
 * same connection share one search.
 *
 * The probe is a GetLock of a fixed name in the call's namespace, served as
 * forwarded (a follower answers NOT_LEADER with its hint, never forwards):
 * it reads, writes nothing, and costs the leader one ReadIndex round.
 */
import { FencerError } from '@fencer/base';
import type { CellState } from './cell-pool.js';
import { LEADER_SEARCH_MS_MAX, LEADER_SEARCH_PAUSE_MS } from './limits.js';
import type { Attempt } from './upstream.js';

/** The lock name the probe reads: in the call's namespace, so the cell owns it. */
export const probeLockName = (namespace: string): string => `/ls/${namespace}/fencer.leader-probe`;

/** Searches under way, per cell and lost address: calls that lost the same connection wait for the same answer. */
const searches = new WeakMap<CellState, Map<string, Promise<string | undefined>>>();

/**
 * After the connection to `lost` failed a call: finds the cell's leader
 * among its other replicas, notes it on the cell and returns it, or
 * undefined when none answered before the deadline (or LEADER_SEARCH_MS_MAX).
 * `lost` is forgotten as the cell's leader meanwhile.
 */
export function searchLeader(
  attempt: Attempt,
  cell: CellState,
  lost: string,
  namespace: string,
  deadlineMs: number,
): Promise<string | undefined> {
  let byLost = searches.get(cell);
  if (byLost === undefined) searches.set(cell, (byLost = new Map()));
  const running = byLost.get(lost);
  if (running !== undefined) return running;
  cell.advance(lost);
  const untilMs = Math.min(deadlineMs, Date.now() + LEADER_SEARCH_MS_MAX);
  const search = askReplicas(attempt, cell, lost, namespace, untilMs).then((found) => {
    byLost.delete(lost);
    if (found !== undefined) cell.noteLeader(found);
    return found;
  });
  byLost.set(lost, search);
  return search;
}

function askReplicas(attempt: Attempt, cell: CellState, lost: string, namespace: string, untilMs: number): Promise<string | undefined> {
  // The lost replica is asked too: a connection can reset while its process lives on (then it still leads and answers).
  const replicas = cell.replicas;
  if (replicas.length === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    let settled = false;
    let asking = replicas.length;
    const cancels = new Set<() => void>();
    const timers = new Set<NodeJS.Timeout>();
    const finish = (found: string | undefined): void => {
      if (settled) return;
      settled = true;
      for (const c of cancels) c();
      for (const t of timers) clearTimeout(t);
      resolve(found);
    };
    const ask = (replica: string): void => {
      if (settled) return;
      if (Date.now() >= untilMs) {
        if (--asking === 0) finish(undefined);
        return;
      }
      let cancel: (() => void) | undefined;
      attempt(replica, 'getLock', { name: probeLockName(namespace) }, untilMs, (c) => cancels.add((cancel = c))).then(
        () => finish(replica),
        (e: unknown) => {
          if (settled) return;
          if (cancel !== undefined) cancels.delete(cancel);
          const named = namedLeader(e, cell, lost);
          if (named !== undefined) return finish(named);
          const t = setTimeout(() => {
            timers.delete(t);
            ask(replica);
          }, LEADER_SEARCH_PAUSE_MS);
          timers.add(t);
        },
      );
    };
    for (const r of replicas) ask(r);
  });
}

/** The replica a follower's answer names as leader, when it is one of the cell's and not the one lost. */
function namedLeader(e: unknown, cell: CellState, lost: string): string | undefined {
  if (!(e instanceof FencerError) || e.code !== 'NOT_LEADER') return undefined;
  const hint = e.leaderHint;
  return hint !== undefined && hint !== lost && cell.replicas.includes(hint) ? hint : undefined;
}
