/**
 * The move worker of the simulated control plane: on whichever meta member
 * leads, passes over every unfinished move, each step decided by
 * @fencer/meta-fsm's `nextMoveStep` (the decisions the control plane's
 * apps/control-plane/src/workers/move-worker.ts performs over gRPC),
 * performed here against the simulated cells (moves-cells.ts) and journaled
 * in the simulated meta group. A pass starts from the journal with no facts
 * and ends when its member crashes or stops leading, so a new meta leader
 * repeats at most the step the old one was doing. Each cell step carries
 * the move's fence: the move id, the journal index of its state, and the
 * meta term the pass began in (read before its barrier and checked after it,
 * so the journal it read is that term's leader's). A cell that refuses a
 * step as fenced (MOVE_FENCED: it applied a step of a newer leader, or of a
 * later state, for the namespace) ends the pass: its member was deposed,
 * whatever it believes.
 *
 * It also plays the operator: while the run lasts, each time the namespace
 * has no unfinished move for a while, it starts one to the other cell.
 */
import type { MoveFence } from '@fencer/lock-fsm';
import { type MetaCommand, type Move, type MoveFacts, type MoveStep, isMetaFailure, nextMoveStep } from '@fencer/meta-fsm';
import type { CellAnswer, MoveCells } from './moves-cells.js';
import { MOVE_CELLS, type Member, type MovesWorld } from './moves-world.js';
import { Tag } from './tags.js';

/** Steps one pass takes for one move at most. */
const STEPS_PER_PASS_MAX = 64;
/** Time one pass may pause for one move before leaving it to the next pass. */
const PAUSES_PER_PASS_MS_MAX = 10_000;
/** A journal write unanswered this long counts as lost (its member crashed). */
const JOURNAL_TIMEOUT_MS = 2_000;
/** Between the end of a move and the start of the next, in ms [min, max]. */
const MOVE_GAP_MS: readonly [number, number] = [200, 1_200];

type Next = () => void;

/** One pass of the worker: on `member` in its life `epoch`, under the meta term `term`. */
interface Pass {
  readonly member: Member;
  readonly epoch: number;
  readonly term: number;
  done: boolean;
}

function termOf(m: Member): number {
  return m.meta?.replica.status().term ?? 0;
}

export class MoveDriver {
  private pass: Pass | undefined;
  private nextMoveAtMs = 0;
  /** Moves are started while this is on (from the end of the setup to the quiet tail). */
  starting = false;
  movesStarted = 0;
  passes = 0;
  /** Cell steps refused as fenced: a deposed leader's pass caught taking one more step. */
  fencedSteps = 0;

  constructor(
    private readonly w: MovesWorld,
    private readonly cells: MoveCells,
    private readonly namespace: string,
  ) {}

  /** Called every few ms: starts a pass on the meta leader unless one runs there. */
  poll(): void {
    const leader = this.w.leaderOf('meta');
    if (leader === undefined) return;
    const p = this.pass;
    if (p !== undefined && !p.done && p.member === leader && p.epoch === leader.epoch) return;
    // The term before the barrier, checked after it (live): the journal read is then that term's leader's.
    const pass: Pass = { member: leader, epoch: leader.epoch, term: termOf(leader), done: false };
    this.pass = pass;
    this.passes++;
    const end = (): void => {
      pass.done = true;
    };
    leader.meta?.readBarrier((e) => {
      if (e || !this.live(pass)) return end();
      const moves = (leader.meta?.state.moves() ?? []).filter((m) => m.state !== 'done' && m.state !== 'failed');
      if (moves.length === 0) return this.maybeStart(pass, end);
      this.driveAll(pass, moves, end);
    });
  }

  private live(pass: Pass): boolean {
    return !pass.done && pass.member.epoch === pass.epoch && pass.member.meta?.isLeader === true && termOf(pass.member) === pass.term;
  }

  private driveAll(pass: Pass, moves: Move[], end: Next): void {
    const [first, ...rest] = moves;
    if (first === undefined) {
      this.nextMoveAtMs = this.w.nowMs() + this.w.random.range(...MOVE_GAP_MS);
      return end();
    }
    this.drive(pass, first, { nowMs: this.w.wallMs() }, 0, 0, () => this.driveAll(pass, rest, end));
  }

  private maybeStart(pass: Pass, end: Next): void {
    const tenant = pass.member.meta?.state.tenant(this.namespace);
    if (!this.starting || tenant === undefined || this.w.nowMs() < this.nextMoveAtMs) return end();
    const toCell = MOVE_CELLS.find((c) => c !== tenant.cell) as string;
    const id = `mv-${pass.member.id}-${pass.epoch}-${this.movesStarted++}`;
    const command: MetaCommand = { kind: 'StartMove', id, namespace: this.namespace, toCell, atMs: this.w.wallMs() };
    this.journalWrite(pass, command, () => end());
  }

  /** Runs one move's steps until it finishes, must wait past this pass's budget, or leadership goes. */
  private drive(pass: Pass, move: Move, facts: MoveFacts, steps: number, pausedMs: number, next: Next): void {
    if (!this.live(pass) || steps >= STEPS_PER_PASS_MAX) return next();
    // The worker runs in its member's process: a paused one takes its next step when it resumes.
    if (pass.member.pausedUntilUs > this.w.sched.now) {
      return this.w.onMember(pass.member, pass.epoch, () => this.drive(pass, move, facts, steps, pausedMs, next));
    }
    const step = nextMoveStep(move, { ...facts, nowMs: this.w.wallMs() });
    if (step.kind === 'finished') return next();
    if (step.kind === 'wait') {
      if (pausedMs + step.ms > PAUSES_PER_PASS_MS_MAX) return next();
      this.w.later(step.ms, Tag.phase, () => {
        // After a pause, look again: a retry's cause, and the first write (a look kept would wait out the budget).
        delete facts.transient;
        delete facts.firstWrite;
        this.drive(pass, move, facts, steps + 1, pausedMs + step.ms, next);
      });
      return;
    }
    this.perform(pass, move, step, facts, (after) => this.drive(pass, after, facts, steps + 1, pausedMs, next));
  }

  /** Performs one step, records what it learned in `facts`, and continues with the move as journaled now. */
  private perform(pass: Pass, move: Move, step: MoveStep, facts: MoveFacts, then: (move: Move) => void): void {
    switch (step.kind) {
      case 'measure-size':
        return this.measure(move, facts, then);
      case 'journal-rollback':
        return this.journal(pass, move, { kind: 'RollBackMove', id: move.id, error: step.error, atMs: this.w.wallMs() }, then);
      case 'journal': {
        const { kind: _kind, ...fields } = step;
        return this.journal(pass, move, { kind: 'AdvanceMove', id: move.id, atMs: this.w.wallMs(), ...fields }, then);
      }
      default:
        return this.performOnCells(pass, move, step, facts, then);
    }
  }

  /**
   * A cell's answer to `step`: learn from a value, or sort a failure into
   * "retry" (transient) or "give up" (failure); then continue.
   */
  private answers(pass: Pass, step: MoveStep, facts: MoveFacts, done: () => void) {
    return <T>(learn: (v: T) => void, tolerate?: string) =>
      (a: CellAnswer<T>): void => {
        if (a.kind === 'refused' && a.code === 'MOVE_FENCED') {
          // A newer leader acted on the namespace: this pass is stale; it learns nothing and ends.
          this.fencedSteps++;
          pass.done = true;
        } else if (a.kind === 'ok') {
          learn(a.value);
          delete facts.transient;
        } else if (a.kind === 'refused' && a.code === tolerate) {
          learn(undefined as T);
          delete facts.transient;
        } else if (a.kind === 'refused') facts.failure = `${step.kind}: ${a.code} ${a.message}`;
        else facts.transient = `${step.kind}: ${a.message}`;
        if (step.kind === 'drop-target') facts.targetDropTried = true;
        done();
      };
  }

  /** The steps a cell performs: each asks the source or the target, and notes what the answer says. */
  private performOnCells(pass: Pass, move: Move, step: MoveStep, facts: MoveFacts, then: (move: Move) => void): void {
    const { namespace: ns, fromCell: from, toCell: to } = move;
    const on = this.answers(pass, step, facts, () => then(move));
    const c = this.cells;
    const fence: MoveFence = { term: pass.term, journalIndex: move.journalIndex ?? 0, moveId: move.id };
    switch (step.kind) {
      case 'clear-target':
        return c.drop(
          to,
          ns,
          fence,
          on(() => (facts.targetCleared = true)),
        );
      case 'freeze-source':
        return c.freeze(
          from,
          ns,
          fence,
          on((rev) => (facts.frozenRevision = rev)),
        );
      case 'copy':
        // The export's answer goes on to the import when it is a value; else it is this step's answer.
        return c.exportNamespace(from, ns, fence, (a) =>
          a.kind === 'ok'
            ? c.importNamespace(
                to,
                ns,
                fence,
                a.value,
                on((n) => (facts.copied = n)),
              )
            : on(() => {})(a),
        );
      case 'unfreeze-target':
        return c.unfreeze(
          to,
          ns,
          fence,
          on(() => (facts.targetUnfrozen = true)),
        );
      case 'drop-source':
        return c.drop(
          from,
          ns,
          fence,
          on(() => (facts.sourceDropped = true)),
        );
      case 'first-write':
        return c.status(
          to,
          ns,
          false,
          on((s) => {
            const u = s.unfreeze;
            facts.firstWrite =
              u === undefined
                ? null
                : { seen: u.firstWriteAfterMs !== undefined, afterMs: u.firstWriteAfterMs ?? 0, unfrozenAgoMs: u.unfrozenAgoMs };
          }),
        );
      case 'unfreeze-source':
        // A source that no longer holds it has nothing left to give back.
        return c.unfreeze(
          from,
          ns,
          fence,
          on(() => (facts.sourceUnfrozen = true), 'NAMESPACE_NOT_HERE'),
        );
      case 'drop-target':
        return c.drop(
          to,
          ns,
          fence,
          on(() => {}),
        );
      default:
        throw new Error(`the driver performs no ${step.kind} step on a cell`);
    }
  }

  /** Measure-size: the source's export size, and whether the target holds a copy already. */
  private measure(move: Move, facts: MoveFacts, then: (move: Move) => void): void {
    this.cells.status(move.fromCell, move.namespace, true, (src) => {
      if (src.kind !== 'ok') return this.failed(src, 'measure-size', facts, () => then(move));
      if (src.value.state === 'absent' || src.value.state === 'moved') {
        facts.failure = `cell ${move.fromCell} does not hold namespace "${move.namespace}"`;
        return then(move);
      }
      this.cells.status(move.toCell, move.namespace, false, (dst) => {
        if (dst.kind !== 'ok') return this.failed(dst, 'measure-size', facts, () => then(move));
        facts.size = {
          exportBytes: src.value.exportBytes,
          importBytesMax: dst.value.importBytesMax,
          targetHolds: dst.value.state === 'active' || dst.value.state === 'frozen',
        };
        delete facts.transient;
        then(move);
      });
    });
  }

  private failed(a: CellAnswer<unknown>, what: string, facts: MoveFacts, then: Next): void {
    if (a.kind === 'refused') facts.failure = `${what}: ${a.code} ${a.message}`;
    else if (a.kind === 'transient') facts.transient = `${what}: ${a.message}`;
    then();
  }

  /** Writes the journal; a refused write (another leader moved the move on) rereads the move as it is. */
  private journal(pass: Pass, move: Move, command: MetaCommand, then: (move: Move) => void): void {
    this.journalWrite(pass, command, (outcome) => {
      const now = pass.member.meta?.state.move(move.id);
      if (outcome === undefined || isMetaFailure(outcome)) return then(now ?? move);
      then((outcome as { move?: Move }).move ?? now ?? move);
    });
  }

  /** Proposes on the pass's member; `done` gets the outcome, or undefined when the write failed or was lost. */
  private journalWrite(pass: Pass, command: MetaCommand, done: (outcome: unknown) => void): void {
    const meta = pass.member.meta;
    if (meta === undefined || !this.live(pass)) return done(undefined);
    let finished = false;
    const finish = (o: unknown): void => {
      if (finished) return;
      finished = true;
      done(o);
    };
    this.w.later(JOURNAL_TIMEOUT_MS, Tag.phase, () => finish(undefined));
    meta.propose({ command }, (r) => finish(r.ok ? r.value.outcome : undefined));
  }
}
