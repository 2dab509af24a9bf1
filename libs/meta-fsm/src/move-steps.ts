/**
 * The steps of a tenant move, decided in pure code
 * (docs/decisions/0011-moves-are-journaled-steps.md,
 * docs/decisions/0019-the-move-worker.md). `nextMoveStep(move, facts)`
 * looks at the journaled move and at what this pass has learned from the
 * cells so far, and names the one thing to do next: a call to a cell, an
 * AdvanceMove for the journal, a pause, or nothing. A driver performs it
 * and records what it learned; the control plane drives it over gRPC, the
 * simulator over simulated cells, both with the same decisions.
 *
 * Every cell step is idempotent by its effect (a freeze of a frozen
 * namespace, an import the target holds already, a drop of a namespace
 * gone), so a new meta leader that starts a pass with no facts repeats at
 * most the step the old one was doing. Before 'switching' a failure rolls
 * back (source unfrozen, the target's copy dropped, then 'failed'); from
 * 'switching' on the route points at the target and the move only goes
 * forward, retrying.
 *
 * A rollback is journaled before it acts (RollBackMove, then the cells,
 * then 'failed'): once it is in the log no leader can journal the switch,
 * so a deposed leader still finishing the copy never unfreezes the target
 * while the source serves again.
 */
import type { Move, MoveState } from './types.js';

/** What one pass has learned from the cells so far. Empty at the start of every pass. */
export interface MoveFacts {
  /** The driver's wall clock now (ms). */
  readonly nowMs: number;
  /** The export the source would make now, and the most the target imports (queued). */
  size?: { readonly exportBytes: number; readonly importBytesMax: number; readonly targetHolds: boolean };
  /** A copy the target held before this move (left by a failed one) was dropped, so an import found there later is this move's. */
  targetCleared?: boolean;
  /** The driver's wall clock when it first sent this pass's freeze (the freeze applied no earlier). */
  freezeSentAtMs?: number;
  /** The source froze the namespace; its last change is this revision. */
  frozenRevision?: number;
  /** The target holds the copy (frozen). */
  copied?: { readonly sessions: number; readonly locks: number };
  targetUnfrozen?: boolean;
  sourceDropped?: boolean;
  /**
   * The target's view of the first write after its unfreeze (null: it did not see the unfreeze, a new leader);
   * `lookedAtMs` is the driver's wall clock when the answer came.
   */
  firstWrite?: {
    readonly seen: boolean;
    readonly afterMs: number;
    readonly unfrozenAgoMs: number;
    readonly lookedAtMs?: number;
  } | null;
  /** A step failed for good (or the namespace stayed frozen too long): roll back, then record this. */
  failure?: string;
  /** The last step failed in a way a retry may fix (a cell without a leader). */
  transient?: string;
  sourceUnfrozen?: boolean;
  /** Rolling back tried to drop the target's copy (once: a target that does not answer is left to the reconciler). */
  targetDropTried?: boolean;
}

export type MoveStep =
  | { readonly kind: 'measure-size' }
  | { readonly kind: 'clear-target' }
  | { readonly kind: 'freeze-source' }
  | { readonly kind: 'copy' }
  | { readonly kind: 'unfreeze-target' }
  | { readonly kind: 'drop-source' }
  | { readonly kind: 'first-write' }
  | { readonly kind: 'unfreeze-source' }
  | { readonly kind: 'drop-target' }
  | { readonly kind: 'journal-rollback'; readonly error: string }
  | {
      readonly kind: 'journal';
      readonly state: MoveState;
      readonly error?: string;
      readonly revision?: number;
      readonly sessions?: number;
      readonly locks?: number;
      readonly unavailableMs?: number;
    }
  /** Come back to this move after `ms` (the next pass, or a pause within this one). */
  | { readonly kind: 'wait'; readonly ms: number; readonly why: string }
  | { readonly kind: 'finished' };

export const MOVE_TIMING = {
  /** A namespace frozen this long before its route switched is given back to its source: a move must not stall a tenant. */
  frozenMsMax: 30_000,
  /** How long after the target's unfreeze the worker waits for a first write to time the unavailability. */
  firstWriteWaitMs: 5_000,
  /** Pause before retrying a step that failed in a way a retry may fix. */
  retryMs: 200,
  /** Pause between looks for the first write. */
  firstWritePollMs: 50,
} as const;

const SWITCHED: readonly MoveState[] = ['switching', 'cleaning', 'done'];

export function isSwitched(state: MoveState): boolean {
  return SWITCHED.includes(state);
}

export function isFinished(state: MoveState): boolean {
  return state === 'done' || state === 'failed';
}

/** The one thing to do next for `move`, given what this pass learned. */
export function nextMoveStep(move: Move, facts: MoveFacts): MoveStep {
  if (isFinished(move.state)) return { kind: 'finished' };
  if (move.rollingBack !== undefined) return rollBack(move, facts, move.rollingBack);
  if (!isSwitched(move.state)) {
    const failure = facts.failure ?? frozenTooLong(move, facts);
    if (failure !== undefined) {
      // Nothing frozen yet: nothing to give back.
      return move.state === 'queued' ? { kind: 'journal', state: 'failed', error: failure } : { kind: 'journal-rollback', error: failure };
    }
  }
  if (facts.transient !== undefined) return { kind: 'wait', ms: MOVE_TIMING.retryMs, why: facts.transient };
  switch (move.state) {
    case 'queued':
      return queued(facts);
    case 'freezing':
      return facts.frozenRevision === undefined
        ? { kind: 'freeze-source' }
        : { kind: 'journal', state: 'copying', revision: facts.frozenRevision };
    case 'copying':
      return facts.copied === undefined
        ? { kind: 'copy' }
        : { kind: 'journal', state: 'switching', sessions: facts.copied.sessions, locks: facts.copied.locks };
    case 'switching':
      return facts.targetUnfrozen === true ? { kind: 'journal', state: 'cleaning' } : { kind: 'unfreeze-target' };
    case 'cleaning':
      return cleaning(move, facts);
    default:
      return { kind: 'finished' };
  }
}

function queued(facts: MoveFacts): MoveStep {
  if (facts.size === undefined) return { kind: 'measure-size' };
  const { exportBytes, importBytesMax } = facts.size;
  // Refused before anything froze: a move too large to run is never half done.
  if (exportBytes > importBytesMax) {
    return {
      kind: 'journal',
      state: 'failed',
      error: `the namespace's export (${exportBytes} bytes) exceeds what the target cell imports (${importBytesMax} bytes); nothing was frozen`,
    };
  }
  if (facts.size.targetHolds && facts.targetCleared !== true) return { kind: 'clear-target' };
  return { kind: 'journal', state: 'freezing' };
}

function frozenTooLong(move: Move, facts: MoveFacts): string | undefined {
  const since = move.stateAtMs?.freezing;
  if (since === undefined || facts.nowMs - since <= MOVE_TIMING.frozenMsMax) return undefined;
  const why = facts.transient !== undefined ? ` (last: ${facts.transient})` : '';
  return `the namespace stayed frozen ${MOVE_TIMING.frozenMsMax} ms without reaching the target${why}; given back to its source`;
}

/**
 * Before the switch: the source serves again, then the target's copy goes,
 * then 'failed'. The source first, since a target that does not answer is
 * often why the move failed; its copy is frozen (it serves no write) and no
 * route points at it, so the ownership reconciler drops it once the target
 * answers if this one try does not.
 */
function rollBack(move: Move, facts: MoveFacts, failure: string): MoveStep {
  if (facts.sourceUnfrozen !== true) {
    if (facts.transient !== undefined) return { kind: 'wait', ms: MOVE_TIMING.retryMs, why: `rolling back: ${facts.transient}` };
    return { kind: 'unfreeze-source' };
  }
  if (move.state === 'copying' && facts.targetDropTried !== true) return { kind: 'drop-target' };
  return { kind: 'journal', state: 'failed', error: failure };
}

function cleaning(move: Move, facts: MoveFacts): MoveStep {
  if (facts.sourceDropped !== true) return { kind: 'drop-source' };
  if (facts.firstWrite === undefined) return { kind: 'first-write' };
  const w = facts.firstWrite;
  if (w !== null && !w.seen && w.unfrozenAgoMs < MOVE_TIMING.firstWriteWaitMs) {
    return { kind: 'wait', ms: MOVE_TIMING.firstWritePollMs, why: 'waiting for the first write the target serves' };
  }
  return { kind: 'journal', state: 'done', unavailableMs: unavailableMs(move, w, facts.freezeSentAtMs) };
}

/**
 * From the freeze to the first write the target served. The start: when
 * this pass sent the freeze (it applied no earlier), or when 'freezing' was
 * journaled if the freeze was another pass's. The end, when the target's
 * leader saw its unfreeze: that time on the driver's clock (when its answer
 * came, less how long ago it unfroze: no earlier than the unfreeze itself)
 * plus its time from the unfreeze to the first write it served. Both ends
 * err late, so this bounds the time from above by the network's one-way
 * times and the freeze's commit, not by the journal writes around the
 * steps. Without that view (an older target), 'cleaning' journaled (after
 * the unfreeze) plus the first write's delay, a looser bound. With no write
 * within the wait (an idle tenant) or no view of the unfreeze (the target's
 * leader changed), the frozen time alone.
 */
export function unavailableMs(move: Move, firstWrite: MoveFacts['firstWrite'], freezeSentAtMs?: number): number {
  const frozeAt = freezeSentAtMs ?? move.stateAtMs?.freezing ?? move.createdAtMs;
  const writeAfter = firstWrite?.seen === true ? firstWrite.afterMs : 0;
  const lookedAt = firstWrite?.lookedAtMs;
  const unfrozeAt =
    firstWrite != null && lookedAt !== undefined ? lookedAt - firstWrite.unfrozenAgoMs : (move.stateAtMs?.cleaning ?? frozeAt);
  return Math.max(0, Math.round(unfrozeAt - frozeAt + writeAfter));
}
