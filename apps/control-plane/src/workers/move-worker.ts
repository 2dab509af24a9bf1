/**
 * The move worker: a LeaderTask that runs every unfinished tenant move
 * (docs/decisions/0019-the-move-worker.md). Which step comes next is
 * decided by @fencer/meta-fsm's `nextMoveStep` from the journaled move and
 * what this pass learned; this file only performs each step over the cells'
 * admin API (MoveCells) and the meta group, and sorts what went wrong into
 * "a retry may fix it" (a cell without a leader) and "it will not" (the
 * cell refused: too large, not its namespace).
 *
 * A pass starts from the journal with no facts, so a new meta leader simply
 * repeats the step of the state it finds; every step is idempotent by its
 * effect. Every cell step carries the move's fence: the meta term this pass
 * runs in (read before the pass's barrier and checked after it, so the
 * journal it read is that term's leader's), the journal index of the move's
 * state and its id. A cell that refuses a step as fenced (MOVE_FENCED) has
 * applied a step of a newer leader or of a later state: this pass is stale
 * and ends; the next one rereads the journal.
 */
import type { Logger } from 'pino';
import {
  isMetaFailure,
  nextMoveStep,
  type MetaCommand,
  type MetaStateMachine,
  type Move,
  type MoveFacts,
  type MoveStep,
} from '@fencer/meta-fsm';
import type { adminpb } from '@fencer/protocol';
import { CellRefusal, type MoveCells } from '../cells.js';
import type { MetaStore } from '../meta-group.js';
import type { LeaderTask } from './leader-loop.js';

export interface MoveWorkerMetrics {
  /** A move entered `state` (after `secondsInPrevious` in the one before). */
  moveAdvanced(state: string, previous: string, secondsInPrevious: number): void;
  /** A move finished done, with its unavailability. */
  moveUnavailable(seconds: number): void;
  /** Unfinished moves, and how long the oldest has been in its state. */
  movesInProgress(count: number, oldestStateSeconds: number): void;
  /** One step performed (a cell call or a journal write), how long it took, and whether it succeeded. */
  moveStep(step: string, seconds: number, ok: boolean): void;
}

export interface MoveWorkerDeps {
  readonly meta: MetaStore;
  /** The meta group's current term (as this instance knows it): the fence of the cell steps a pass takes. */
  readonly term: () => number;
  readonly cells: MoveCells;
  readonly logger: Logger;
  readonly wallMs: () => number;
  readonly metrics?: MoveWorkerMetrics;
  /** Pause between passes when nothing wakes the task. */
  readonly intervalMs?: number;
  /** Time one pass may pause for one move (default PAUSES_PER_PASS_MS_MAX). */
  readonly pauseBudgetMs?: number;
  /**
   * A pause before each cell step (default 0). Process tests set it so a
   * move stays in each state long enough to stop the meta leader there; it
   * does not count against the pause budget.
   */
  readonly stepPauseMs?: number;
}

/** Steps one pass takes for one move at most (a whole move is about a dozen). */
const STEPS_PER_PASS_MAX = 64;
/** Time one pass may spend pausing for one move (a first write, a retry) before it leaves the move for the next pass. */
const PAUSES_PER_PASS_MS_MAX = 10_000;

/** Steps stepPauseMs does not delay: journal writes, and the first-write poll (its pauses are MOVE_TIMING's). */
const UNPAUSED_STEPS: ReadonlySet<MoveStep['kind']> = new Set(['journal', 'journal-rollback', 'first-write']);

export const MOVES_TASK = 'moves';

export function moveWorker(deps: MoveWorkerDeps): LeaderTask {
  return {
    name: MOVES_TASK,
    intervalMs: deps.intervalMs ?? 1_000,
    async runPass(signal) {
      const term = deps.term();
      const state = await deps.meta.read();
      // The barrier confirmed leadership in the term it ran in: the same term as before it, or this read is not that term's.
      if (deps.term() !== term || !deps.meta.isLeader) return;
      reportProgress(deps, state);
      for (const move of state.moves()) {
        if (signal.aborted) return;
        if (move.state === 'done' || move.state === 'failed') continue;
        if ((await driveMove(deps, move, term, signal)) === 'fenced') return;
      }
    },
  };
}

function reportProgress(deps: MoveWorkerDeps, state: MetaStateMachine): void {
  if (!deps.metrics) return;
  const now = deps.wallMs();
  let count = 0;
  let oldest = 0;
  for (const m of state.moves()) {
    if (m.state === 'done' || m.state === 'failed') continue;
    count++;
    const since = m.stateAtMs?.[m.state] ?? m.createdAtMs;
    oldest = Math.max(oldest, (now - since) / 1000);
  }
  deps.metrics.movesInProgress(count, oldest);
}

/**
 * Runs one move's steps until it finishes, must wait past this pass's budget, or leadership goes;
 * 'fenced' when a cell refused a step as older than one it applied (this pass is stale).
 */
async function driveMove(deps: MoveWorkerDeps, first: Move, term: number, signal: AbortSignal): Promise<'fenced' | undefined> {
  let move = first;
  const facts: MoveFacts = { nowMs: deps.wallMs() };
  let pausedMs = 0;
  for (let i = 0; i < STEPS_PER_PASS_MAX && !signal.aborted && deps.term() === term; i++) {
    const step = nextMoveStep(move, { ...facts, nowMs: deps.wallMs() });
    if (step.kind === 'finished') return undefined;
    if (step.kind === 'wait') {
      if (pausedMs + step.ms > (deps.pauseBudgetMs ?? PAUSES_PER_PASS_MS_MAX)) return undefined;
      pausedMs += step.ms;
      await pause(step.ms, signal);
      delete facts.transient;
      // A wait for the target's first write polls: the next step looks again (a stale view would wait the pass out).
      delete facts.firstWrite;
      continue;
    }
    if (deps.stepPauseMs && !UNPAUSED_STEPS.has(step.kind)) {
      await pause(deps.stepPauseMs, signal);
      if (signal.aborted) return undefined;
    }
    const startedMs = performance.now();
    const timed = (ok: boolean) => deps.metrics?.moveStep(stepLabel(step), (performance.now() - startedMs) / 1000, ok);
    try {
      move = await perform(deps, move, step, facts, { term, journalIndex: move.journalIndex ?? 0, moveId: move.id });
      timed(true);
      delete facts.transient;
    } catch (e) {
      timed(false);
      if (e instanceof CellRefusal && e.reason === 'MOVE_FENCED') {
        deps.logger.info({ move: move.id, step: step.kind, term, err: e.message }, 'move step fenced: this pass is stale; it ends');
        return 'fenced';
      }
      if (e instanceof CellRefusal) facts.failure = e.message;
      else facts.transient = (e as Error).message;
      if (step.kind === 'drop-target') facts.targetDropTried = true;
      deps.logger.warn({ move: move.id, step: step.kind, err: (e as Error).message }, 'move step failed');
    }
  }
  return undefined;
}

/** A step's name in the step histogram: a journal write names the state it writes ("journal switching"). */
function stepLabel(step: MoveStep): string {
  return step.kind === 'journal' ? `journal ${step.state}` : step.kind;
}

/** Performs one step, its cell calls carrying `fence`; returns the move as journaled now. */
async function perform(deps: MoveWorkerDeps, move: Move, step: MoveStep, facts: MoveFacts, fence: adminpb.MoveFence): Promise<Move> {
  const { cells } = deps;
  const { namespace: ns, fromCell: from, toCell: to } = move;
  switch (step.kind) {
    case 'measure-size': {
      const source = await cells.namespaceStatus(from, ns, true);
      if (source.state === 'absent' || source.state === 'moved')
        throw new CellRefusal(from, 'NAMESPACE_NOT_HERE', `cell ${from} does not hold namespace "${ns}"`);
      const target = await cells.namespaceStatus(to, ns, false);
      facts.size = {
        exportBytes: source.exportBytes,
        importBytesMax: target.importBytesMax,
        targetHolds: target.state === 'active' || target.state === 'frozen',
      };
      return move;
    }
    case 'clear-target':
      await cells.drop(to, ns, true, fence);
      facts.targetCleared = true;
      return move;
    case 'freeze-source':
      // The first send of this pass's freeze starts the unavailability (a retry may follow a freeze that applied).
      facts.freezeSentAtMs ??= deps.wallMs();
      facts.frozenRevision = (await cells.freeze(from, ns, fence)).namespaceRevision;
      return move;
    case 'copy': {
      const exported = await cells.exportNamespace(from, ns, fence);
      const imported = await cells.importNamespace(to, ns, exported, fence);
      facts.copied = { sessions: imported.sessions, locks: imported.locks };
      return move;
    }
    case 'unfreeze-target':
      await cells.unfreeze(to, ns, fence);
      facts.targetUnfrozen = true;
      return move;
    case 'drop-source':
      await cells.drop(from, ns, true, fence);
      facts.sourceDropped = true;
      return move;
    case 'first-write': {
      const v = await cells.namespaceStatus(to, ns, false);
      const lookedAtMs = deps.wallMs();
      facts.firstWrite = v.unfrozenHere
        ? { seen: v.firstWriteSeen, afterMs: v.firstWriteAfterMs, unfrozenAgoMs: v.unfrozenAgoMs, lookedAtMs }
        : null;
      return move;
    }
    case 'unfreeze-source':
      await cells.unfreeze(from, ns, fence).catch((e: unknown) => {
        // A source that no longer holds it has nothing left to give back.
        if (!(e instanceof CellRefusal && e.reason === 'NAMESPACE_NOT_HERE')) throw e;
      });
      facts.sourceUnfrozen = true;
      return move;
    case 'drop-target':
      facts.targetDropTried = true;
      await cells.drop(to, ns, true, fence);
      return move;
    case 'journal-rollback':
      return journal(deps, move, { kind: 'RollBackMove', id: move.id, error: step.error, atMs: deps.wallMs() });
    case 'journal': {
      const { kind: _kind, ...fields } = step;
      return journal(deps, move, { kind: 'AdvanceMove', id: move.id, atMs: deps.wallMs(), ...fields });
    }
    default:
      throw new Error(`the driver performs no ${step.kind} step`);
  }
}

/** Writes the journal; a refused write (another leader moved the move on) rereads the move as it is. */
async function journal(deps: MoveWorkerDeps, move: Move, command: MetaCommand): Promise<Move> {
  const applied = await deps.meta.write({ command });
  if (isMetaFailure(applied.outcome)) {
    deps.logger.info({ move: move.id, detail: applied.outcome.detail }, 'move journal write refused; rereading the move');
    const now = (await deps.meta.read()).move(move.id);
    if (now === undefined) throw new Error(`move ${move.id} is gone from the journal`);
    return now;
  }
  const next = (applied.outcome as { move: Move }).move;
  if (command.kind === 'AdvanceMove' && next.state !== move.state) {
    const enteredAt = move.stateAtMs?.[move.state] ?? move.createdAtMs;
    deps.metrics?.moveAdvanced(next.state, move.state, Math.max(0, (command.atMs - enteredAt) / 1000));
    if (next.state === 'done' && next.unavailableMs !== undefined) deps.metrics?.moveUnavailable(next.unavailableMs / 1000);
    deps.logger.info(
      { move: move.id, namespace: move.namespace, state: next.state, ...(next.error ? { error: next.error } : {}) },
      'move advanced',
    );
  }
  return next;
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
