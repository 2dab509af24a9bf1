/**
 * Heartbeats are answered only after the leader has confirmed it still leads
 * (one ReadIndex round, shared by every heartbeat that arrived before the
 * round began). A deposed leader that has not noticed yet therefore never
 * acknowledges a heartbeat: a client's lease, counted from when it sent the
 * heartbeat, ends no later than the fresh TTL a new leader grants at its
 * election, so the client never believes in a session the cell may expire.
 *
 * Rounds may be spaced: a round starts no sooner than `spacingMs` after the
 * previous one started. Each round costs a heartbeat to every follower and
 * an answer from each (a socket write and a wake-up on both sides), whatever
 * the number of heartbeats it confirms; under a steady stream, back-to-back
 * rounds would spend a good part of the cell's CPU on confirmations
 * (docs/benchmarks.md). Spacing never delays a heartbeat that arrives after
 * a quiet spell.
 */
export type ConfirmRound = (done: (error: Error | null) => void) => void;

export interface ConfirmerTiming {
  /** Least time between the starts of two rounds (0: back to back). */
  readonly spacingMs: number;
  readonly nowMs: () => number;
  /** Runs `run` once after `ms` (the cell's injected timer; tests pass a fake). */
  readonly after: (ms: number, run: () => void) => void;
}

const noSpacing: ConfirmerTiming = { spacingMs: 0, nowMs: () => 0, after: () => {} };

export class HeartbeatConfirmer {
  private waiting: ((error: Error | null) => void)[] = [];
  private inFlight = false;
  /** A spaced start is scheduled. */
  private timerSet = false;
  private lastStartMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly round: ConfirmRound,
    private readonly waitingMax: number,
    private readonly timing: ConfirmerTiming = noSpacing,
  ) {}

  /** Runs `then` after a confirmation round that began after this call. False when too many are waiting. */
  confirm(then: (error: Error | null) => void): boolean {
    if (this.waiting.length >= this.waitingMax) return false;
    this.waiting.push(then);
    this.startRound();
    return true;
  }

  private startRound(): void {
    if (this.inFlight || this.timerSet || this.waiting.length === 0) return;
    const { spacingMs, nowMs, after } = this.timing;
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
    const batch = this.waiting;
    this.waiting = [];
    this.round((error) => {
      this.inFlight = false;
      for (const then of batch) then(error);
      this.startRound();
    });
  }
}
