/**
 * Shared ReadIndex rounds (Raft dissertation §6.4): whoever must know that
 * this leader still leads (a linearizable read, a batch of heartbeats that
 * may extend leases) waits for one round that began after it asked, and
 * every waiter that arrives while a round is in flight shares the next one.
 * One round is in flight at a time, whatever the number of waiters; a round
 * that began before a waiter arrived never answers it, since it may have
 * confirmed a leadership that ended before the waiter came.
 *
 * Rounds may be spaced: a round starts no sooner than `spacingMs` after the
 * previous one started. Each round costs a heartbeat to every follower and
 * an answer from each (a socket write and a wake-up on both sides), whatever
 * the number of waiters it confirms; under a steady stream, back-to-back
 * rounds would spend a good part of the cell's CPU on confirmations
 * (docs/benchmarks.md). Spacing never delays a waiter that arrives after a
 * quiet spell.
 */
import { assert } from '@fencer/base';

/** Runs one ReadIndex round: `done(null)` once leadership is confirmed and the read index applied, else the error. */
export type ReadIndexRound = (done: (error: Error | null) => void) => void;

export interface RoundSpacing {
  /** Least time between the starts of two rounds (0: back to back). */
  readonly spacingMs: number;
  readonly nowMs: () => number;
  /** Runs `run` once after `ms` (the group's injected timer; tests pass a fake). */
  readonly after: (ms: number, run: () => void) => void;
}

const noSpacing: RoundSpacing = { spacingMs: 0, nowMs: () => 0, after: () => {} };

export class ReadIndexRounds {
  /** Waiters for the next round, none of which any round in flight answers. */
  private waiting: ((error: Error | null) => void)[] = [];
  /** A round is running; at most one at a time. */
  private inFlight = false;
  /** A spaced start is scheduled; never while a round is in flight. */
  private timerSet = false;
  private lastStartMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly round: ReadIndexRound,
    private readonly waitingMax: number,
    private readonly spacing: RoundSpacing = noSpacing,
  ) {
    assert(waitingMax >= 0 && spacing.spacingMs >= 0, 'a waiter limit and a spacing of 0 or more');
  }

  /** Waiters for a round that has not started yet. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Runs `then` after a round that began after this call. False (and `then` never runs) when too many are waiting. */
  confirm(then: (error: Error | null) => void): boolean {
    if (this.waiting.length >= this.waitingMax) return false;
    this.waiting.push(then);
    this.startRound();
    return true;
  }

  private startRound(): void {
    if (this.inFlight || this.timerSet || this.waiting.length === 0) return;
    const { spacingMs, nowMs, after } = this.spacing;
    if (spacingMs > 0) {
      const now = nowMs();
      const wait = this.lastStartMs + spacingMs - now;
      if (wait > 0) {
        this.timerSet = true;
        after(wait, () => {
          this.timerSet = false;
          this.startRound();
        });
        return;
      }
      this.lastStartMs = now;
    }
    this.inFlight = true;
    // The batch is taken as the round starts: a waiter that arrives from here on waits for the next round.
    const batch = this.waiting;
    this.waiting = [];
    let completed = false;
    this.round((error) => {
      assert(!completed, 'a ReadIndex round completes once');
      completed = true;
      assert(this.inFlight && !this.timerSet, 'the round that completes is the one in flight, and no spaced start was scheduled meanwhile');
      this.inFlight = false;
      for (const then of batch) then(error);
      this.startRound();
    });
  }
}
