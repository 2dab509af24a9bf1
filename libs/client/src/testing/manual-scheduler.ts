/**
 * A scheduler whose time moves only when a test says so. `advance(ms)` fires
 * every timer that falls due, in due-time order (ties in creation order), with
 * the clock set to each timer's due time while it runs, so code under test
 * sees exactly the instants it asked for.
 */
import { assert } from '@fencer/base';
import type { Scheduler, TimerHandle } from '../scheduler.js';

interface Timer {
  readonly id: number;
  readonly dueMonoMs: number;
  readonly fn: () => void;
}

/** Timers fired by one advance(), at most: a runaway timer loop fails loudly instead of hanging a test. */
const FIRED_PER_ADVANCE_MAX = 100_000;

export class ManualScheduler implements Scheduler {
  private nowMonoMs: number;
  private nextId = 1;
  private readonly timers = new Map<number, Timer>();

  constructor(
    startMonoMs = 0,
    private readonly wallOffsetMs = 1_700_000_000_000,
  ) {
    this.nowMonoMs = startMonoMs;
  }

  monoMs(): number {
    return this.nowMonoMs;
  }

  wallMs(): number {
    return this.nowMonoMs + this.wallOffsetMs;
  }

  setTimer(fn: () => void, delayMs: number): TimerHandle {
    const id = this.nextId++;
    this.timers.set(id, { id, dueMonoMs: this.nowMonoMs + Math.max(0, delayMs), fn });
    return { id };
  }

  clearTimer(handle: TimerHandle): void {
    this.timers.delete((handle as { id: number }).id);
  }

  /** Number of timers waiting to fire. */
  get pending(): number {
    return this.timers.size;
  }

  /** Due time of the earliest pending timer, if any. */
  nextDueMonoMs(): number | undefined {
    let best: number | undefined;
    for (const t of this.timers.values()) if (best === undefined || t.dueMonoMs < best) best = t.dueMonoMs;
    return best;
  }

  /** Moves time forward by ms, firing due timers in order. */
  advance(ms: number): void {
    assert(Number.isFinite(ms) && ms >= 0, `a monotonic clock cannot go back (advance ${ms})`);
    this.advanceTo(this.nowMonoMs + ms);
  }

  /** Moves time forward to an absolute instant, firing due timers in order. */
  advanceTo(targetMonoMs: number): void {
    assert(targetMonoMs >= this.nowMonoMs, `cannot move time back from ${this.nowMonoMs} to ${targetMonoMs}`);
    for (let fired = 0; ; fired++) {
      assert(fired < FIRED_PER_ADVANCE_MAX, 'too many timers fired in one advance(): a timer keeps rescheduling itself at once');
      let next: Timer | undefined;
      for (const t of this.timers.values()) {
        if (t.dueMonoMs > targetMonoMs) continue;
        if (!next || t.dueMonoMs < next.dueMonoMs || (t.dueMonoMs === next.dueMonoMs && t.id < next.id)) next = t;
      }
      if (!next) break;
      this.timers.delete(next.id);
      this.nowMonoMs = Math.max(this.nowMonoMs, next.dueMonoMs);
      next.fn();
    }
    this.nowMonoMs = targetMonoMs;
  }
}
