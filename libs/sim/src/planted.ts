/**
 * Planted lock-level bugs, to show the lock checkers fire (tests only; they
 * reach the production cell only through LockCellTestHooks, which the cell
 * node never passes):
 * - reuseToken: a fresh grant reports a token shared by every grant in its
 *   block of 64 revisions (tokens stop strictly increasing);
 * - doubleGrant: an Acquire that queued reports GRANTED at once, so a second
 *   holder is told it holds a busy lock;
 * - staleLockRead: a linearizable read is answered from the most lagging
 *   replica's state;
 * - heartbeatWithoutConfirmation: the leader extends a lease at once,
 *   without the round that confirms it still leads, so a deposed leader
 *   that has not noticed yet acknowledges heartbeats (early-expiry catches it);
 * - readWithoutBarrier, grantBeforeCommit: the cell's own switches, the
 *   ones chaos plants in real processes (tools/chaos --bug): every replica
 *   answers reads from its applied state without a read barrier; the
 *   leader answers GRANTED for a free lock as soon as it appends the
 *   Acquire, before it commits.
 * The first two rewrite what the state machine reports the same way on
 * every replica, so the replicas still agree and only a lock-level checker
 * can tell.
 */
import type { LockCellTestHooks } from '@fencer/cell';
import type { ApplyResult, LockEvent, LockStateMachine } from '@fencer/lock-fsm';

export type PlantedBug =
  'reuseToken' | 'doubleGrant' | 'staleLockRead' | 'heartbeatWithoutConfirmation' | 'readWithoutBarrier' | 'grantBeforeCommit';
export const PLANTED_BUGS: readonly PlantedBug[] = [
  'reuseToken',
  'doubleGrant',
  'staleLockRead',
  'heartbeatWithoutConfirmation',
  'readWithoutBarrier',
  'grantBeforeCommit',
];

/** The cell's test hooks that put `bug` in; `mostLagging` finds the state a stale read answers from. */
export function plantedHooks(bug: PlantedBug | null, mostLagging: () => LockStateMachine): Partial<LockCellTestHooks> {
  switch (bug) {
    case null:
      return {};
    case 'reuseToken':
    case 'doubleGrant':
      return { rewriteApplied: (command, applied) => (command.kind === 'Acquire' ? plant(bug, applied) : applied) };
    case 'staleLockRead':
      return { readState: mostLagging };
    case 'heartbeatWithoutConfirmation':
      return { heartbeatWithoutConfirmation: true };
    case 'readWithoutBarrier':
      return { readWithoutBarrier: true };
    case 'grantBeforeCommit':
      return { grantBeforeCommit: true };
  }
}

function plant(bug: 'reuseToken' | 'doubleGrant', applied: ApplyResult): ApplyResult {
  const o = applied.outcome;
  if (!o.ok || !('status' in o) || o.deduped) return applied;
  if (bug === 'reuseToken' && o.status === 'GRANTED') {
    const token = (Math.floor(o.token / 64) * 64 + 1) as typeof o.token;
    const events = applied.events.map((e) => (e.type === 'ACQUIRED' && e.token === o.token ? { ...e, token } : e));
    return { ...applied, outcome: { ...o, token, revision: token }, events };
  }
  if (bug === 'doubleGrant' && o.status === 'QUEUED') {
    const token = applied.revision;
    const events = applied.events.map((e): LockEvent => (e.type === 'QUEUED' ? { ...e, type: 'ACQUIRED', token } : e));
    return { ...applied, outcome: { ok: true, status: 'GRANTED', token, holders: [], revision: token, deduped: false }, events };
  }
  return applied;
}
