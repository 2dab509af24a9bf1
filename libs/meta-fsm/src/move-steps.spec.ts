/**
 * Goal: the move worker's decisions (move-steps.ts,
 * docs/decisions/0019-the-move-worker.md): the happy path takes every state
 * in order with its figures; a move too large is refused before anything
 * freezes; a step that fails for good, or a namespace frozen too long,
 * rolls back through the journal first (after which no switch is
 * possible), giving the source back; after the switch a failure only
 * waits; a new leader starting with no facts repeats at most one step.
 * Method: a synchronous driver over a model of two cells (the namespace's
 * state on each) and a real MetaStateMachine as the journal.
 */
import { describe, expect, it } from 'vitest';
import { MetaStateMachine } from './state-machine.js';
import { MOVE_TIMING, nextMoveStep, unavailableMs, type MoveFacts, type MoveStep } from './move-steps.js';
import type { Move } from './types.js';

type NsState = 'active' | 'frozen' | 'absent';

class World {
  readonly journal = new MetaStateMachine();
  private index = 0;
  nowMs = 1_000;
  cells: Record<string, NsState> = { a: 'active', b: 'absent' };
  /** Steps performed, in order. */
  readonly log: string[] = [];
  /** Makes a step fail: 'transient' (a retry may fix it) or 'permanent'. */
  fail: Partial<Record<MoveStep['kind'], 'transient' | 'permanent'>> = {};
  exportBytes = 1_000;
  firstWriteAfterMs = 40;

  constructor() {
    this.write({ kind: 'CreateTenant', namespace: 'pay', cell: 'a', atMs: 0 });
    this.write({ kind: 'StartMove', id: 'm1', namespace: 'pay', toCell: 'b', atMs: this.nowMs });
  }

  write(command: Parameters<MetaStateMachine['apply']>[1]['command']) {
    return this.journal.apply(++this.index, { command }).outcome;
  }

  get move(): Move {
    return this.journal.move('m1')!;
  }

  /** Runs one pass: steps until finished, a wait, or `maxSteps`. Returns the steps taken. */
  pass(facts: MoveFacts = { nowMs: this.nowMs }, maxSteps = 50): MoveStep[] {
    const taken: MoveStep[] = [];
    for (let i = 0; i < maxSteps; i++) {
      const step = nextMoveStep(this.move, { ...facts, nowMs: this.nowMs });
      taken.push(step);
      if (step.kind === 'finished' || step.kind === 'wait') return taken;
      this.perform(step, facts);
      this.nowMs += 5;
    }
    return taken;
  }

  private perform(step: MoveStep, facts: MoveFacts): void {
    this.log.push(step.kind === 'journal' ? `journal:${step.state}` : step.kind);
    const mode = this.fail[step.kind];
    delete facts.transient;
    if (mode === 'transient') {
      facts.transient = `${step.kind} failed`;
      if (step.kind === 'drop-target') facts.targetDropTried = true;
      return;
    }
    if (mode === 'permanent') {
      facts.failure = `${step.kind} refused`;
      return;
    }
    switch (step.kind) {
      case 'measure-size':
        facts.size = { exportBytes: this.exportBytes, importBytesMax: 10_000, targetHolds: this.cells.b !== 'absent' };
        return;
      case 'clear-target':
        this.cells.b = 'absent';
        facts.targetCleared = true;
        return;
      case 'freeze-source':
        this.cells.a = 'frozen';
        facts.frozenRevision = 77;
        return;
      case 'copy':
        this.cells.b = 'frozen';
        facts.copied = { sessions: 3, locks: 5 };
        return;
      case 'unfreeze-target':
        this.cells.b = 'active';
        facts.targetUnfrozen = true;
        return;
      case 'drop-source':
        this.cells.a = 'absent';
        facts.sourceDropped = true;
        return;
      case 'first-write':
        facts.firstWrite = { seen: true, afterMs: this.firstWriteAfterMs, unfrozenAgoMs: 100 };
        return;
      case 'unfreeze-source':
        this.cells.a = 'active';
        facts.sourceUnfrozen = true;
        return;
      case 'drop-target':
        this.cells.b = 'absent';
        facts.targetDropTried = true;
        return;
      case 'journal-rollback':
        expect(this.write({ kind: 'RollBackMove', id: 'm1', error: step.error, atMs: this.nowMs })).toMatchObject({ ok: true });
        return;
      case 'journal': {
        const { kind: _kind, ...fields } = step;
        expect(this.write({ kind: 'AdvanceMove', id: 'm1', atMs: this.nowMs, ...fields })).toMatchObject({ ok: true });
        return;
      }
      default:
        throw new Error(`unexpected step ${step.kind}`);
    }
  }
}

describe('the move worker’s steps', () => {
  it('takes every state in order, freezing before copying and unfreezing the target before dropping the source', () => {
    const w = new World();
    const steps = w.pass();
    expect(steps.at(-1)).toEqual({ kind: 'finished' });
    expect(w.log).toEqual([
      'measure-size',
      'journal:freezing',
      'freeze-source',
      'journal:copying',
      'copy',
      'journal:switching',
      'unfreeze-target',
      'journal:cleaning',
      'drop-source',
      'first-write',
      'journal:done',
    ]);
    expect(w.cells).toEqual({ a: 'absent', b: 'active' });
    expect(w.move).toMatchObject({ state: 'done', revision: 77, sessions: 3, locks: 5 });
    // From 'freezing' journaled to 'cleaning' journaled, plus the target's first write after its unfreeze.
    const { freezing, cleaning } = w.move.stateAtMs!;
    expect(w.move.unavailableMs).toBe(cleaning! - freezing! + 40);
    expect(w.journal.routes()).toEqual([{ namespace: 'pay', cell: 'b', state: 'active' }]);
  });

  it('drops a copy the target kept from a failed move before freezing, so an import found there is this move’s', () => {
    const w = new World();
    w.cells.b = 'frozen';
    w.pass();
    expect(w.log.slice(0, 3)).toEqual(['measure-size', 'clear-target', 'journal:freezing']);
    expect(w.move.state).toBe('done');
  });

  it('refuses a move too large for the target before anything freezes', () => {
    const w = new World();
    w.exportBytes = 20_000;
    w.pass();
    expect(w.log).toEqual(['measure-size', 'journal:failed']);
    expect(w.move.error).toMatch(/20000 bytes.*10000 bytes.*nothing was frozen/);
    expect(w.cells).toEqual({ a: 'active', b: 'absent' });
  });

  it('rolls back through the journal when the import is refused: the source serves again, the copy goes, failed', () => {
    const w = new World();
    w.fail.copy = 'permanent';
    w.pass();
    expect(w.log.slice(-5)).toEqual(['copy', 'journal-rollback', 'unfreeze-source', 'drop-target', 'journal:failed']);
    expect(w.move).toMatchObject({ state: 'failed', error: 'copy refused' });
    expect(w.cells.a).toBe('active');
    expect(w.journal.routes()).toEqual([{ namespace: 'pay', cell: 'a', state: 'active' }]);
  });

  it('retries a transient failure, and gives the namespace back once it stayed frozen too long', () => {
    const w = new World();
    w.fail.copy = 'transient';
    const first = w.pass();
    expect(first.at(-1)).toMatchObject({ kind: 'wait', why: 'copy failed' });
    expect(w.move.state).toBe('copying');
    w.nowMs += MOVE_TIMING.frozenMsMax + 1;
    // The target never answers: its drop is tried once and left to the reconciler.
    w.fail['drop-target'] = 'transient';
    w.pass();
    expect(w.move).toMatchObject({ state: 'failed' });
    expect(w.move.error).toMatch(/stayed frozen .* given back to its source/);
    expect(w.log.slice(-4)).toEqual(['journal-rollback', 'unfreeze-source', 'drop-target', 'journal:failed']);
    expect(w.cells.a).toBe('active');
  });

  it('once rolling back no switch can be journaled (a deposed leader finishing the copy is refused)', () => {
    const w = new World();
    w.fail.copy = 'permanent';
    w.pass({ nowMs: w.nowMs }, 6); // up to and including journal-rollback
    expect(w.move.rollingBack).toBe('copy refused');
    expect(w.write({ kind: 'AdvanceMove', id: 'm1', state: 'switching', atMs: w.nowMs })).toMatchObject({
      ok: false,
      code: 'INVALID_REQUEST',
    });
    // A new leader with no facts continues the rollback.
    w.fail = {};
    w.pass();
    expect(w.move.state).toBe('failed');
  });

  it('after the switch only goes forward: a failing step waits and is retried', () => {
    const w = new World();
    w.fail['drop-source'] = 'transient';
    const steps = w.pass();
    expect(steps.at(-1)).toMatchObject({ kind: 'wait' });
    expect(w.move.state).toBe('cleaning');
    w.nowMs += MOVE_TIMING.frozenMsMax * 10;
    expect(nextMoveStep(w.move, { nowMs: w.nowMs, failure: 'anything' })).toEqual({ kind: 'drop-source' });
    w.fail = {};
    w.pass();
    expect(w.move.state).toBe('done');
  });

  it('a new leader starting each state with no facts repeats only that state’s step', () => {
    for (let cut = 1; cut <= 10; cut++) {
      const w = new World();
      w.pass({ nowMs: w.nowMs }, cut);
      const before = w.log.length;
      w.pass();
      expect(w.move.state, `cut after ${cut} steps`).toBe('done');
      // The resumed pass repeats at most the one cell step of the state it found.
      expect(w.log.length - before, `cut after ${cut} steps`).toBeLessThanOrEqual(11 - cut + 2);
      expect(w.cells).toEqual({ a: 'absent', b: 'active' });
    }
  });

  it('waits a while for the target’s first write, then counts the frozen time alone', () => {
    const move = { createdAtMs: 0, stateAtMs: { freezing: 100, cleaning: 180 } } as unknown as Move;
    expect(unavailableMs(move, { seen: true, afterMs: 30, unfrozenAgoMs: 90 })).toBe(110);
    expect(unavailableMs(move, { seen: false, afterMs: 0, unfrozenAgoMs: 9_000 })).toBe(80);
    expect(unavailableMs(move, null)).toBe(80);
    // With this pass's freeze time and the target's view on the driver's clock: from the freeze sent (120) to the
    // unfreeze the target saw (look at 200, 50 ms after it: 150) plus its first write 30 ms later.
    expect(unavailableMs(move, { seen: true, afterMs: 30, unfrozenAgoMs: 50, lookedAtMs: 200 }, 120)).toBe(60);
    expect(unavailableMs(move, { seen: false, afterMs: 0, unfrozenAgoMs: 50, lookedAtMs: 200 }, 120)).toBe(30);
    // A freeze sent by an earlier pass: 'freezing' journaled (100) is the start.
    expect(unavailableMs(move, { seen: true, afterMs: 30, unfrozenAgoMs: 50, lookedAtMs: 200 })).toBe(80);
    const cleaning = { ...move, state: 'cleaning' } as Move;
    const facts: MoveFacts = { nowMs: 0, sourceDropped: true, firstWrite: { seen: false, afterMs: 0, unfrozenAgoMs: 10 } };
    expect(nextMoveStep(cleaning, facts)).toMatchObject({ kind: 'wait' });
    facts.firstWrite = { seen: false, afterMs: 0, unfrozenAgoMs: MOVE_TIMING.firstWriteWaitMs };
    expect(nextMoveStep(cleaning, facts)).toEqual({ kind: 'journal', state: 'done', unavailableMs: 80 });
  });
});
