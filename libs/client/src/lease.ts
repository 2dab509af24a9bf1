/**
 * The local lease of one session (Chubby §2.8): the client's conservative
 * estimate of how long the cell will keep the session alive.
 *
 * A heartbeat's answer says how much of the TTL remains *at the server when
 * it answered*. The server answered after the heartbeat was sent, so
 * `sent + remaining` on the client's monotonic clock is never later than the
 * server's own deadline — as long as both clocks run at the same rate. The
 * drift margin covers rate differences (ppm of the TTL) plus a fixed margin
 * for the time between reading the clock and acting on it. A lease measured
 * from the answer's arrival instead would overstate it by the round trip.
 *
 * When the lease passes without renewal the session is in *jeopardy*: the
 * cell may or may not have expired it. The client keeps trying for a grace
 * period; a renewal in that time makes it *safe* again (a new leader gives
 * every session a fresh TTL), otherwise it is *expired*. An answer that says
 * `expired` ends it at once. This class is pure: time comes in as arguments.
 */
import { assert } from '@fencer/base';
import { leaseMarginMs } from './limits.js';
import type { SessionState } from './types.js';

export interface LeaseConfig {
  readonly ttlMs: number;
  readonly gracePeriodMs: number;
  readonly driftPpm: number;
  readonly driftMarginMs: number;
}

export type LeaseTransition = 'jeopardy' | 'safe' | 'expired';

export class Lease {
  private stateNow: SessionState = 'safe';
  /** Local lease end; meaningful while safe. Invariant: only moves forward while safe. */
  private deadline: number;
  /** End of the grace period; meaningful in jeopardy. */
  private graceEnd = 0;
  /** Send time of the heartbeat (or OpenSession) whose answer set the lease. */
  private renewedFrom: number;
  readonly marginMs: number;

  constructor(
    readonly config: LeaseConfig,
    /** When the OpenSession request that created the session was sent. */
    openedSentMonoMs: number,
  ) {
    assert(config.ttlMs > 0 && config.gracePeriodMs >= 0, 'a lease needs a positive TTL and a non-negative grace period');
    this.marginMs = leaseMarginMs(config.ttlMs, config.driftPpm, config.driftMarginMs);
    assert(this.marginMs < config.ttlMs, `the lease margin (${this.marginMs} ms) must be shorter than the TTL (${config.ttlMs} ms)`);
    this.renewedFrom = openedSentMonoMs;
    this.deadline = openedSentMonoMs + config.ttlMs - this.marginMs;
  }

  get state(): SessionState {
    return this.stateNow;
  }

  /** Local lease end (safe) — the instant jeopardy begins unless renewed first. */
  get deadlineMonoMs(): number {
    return this.deadline;
  }

  /** End of the grace period (jeopardy) — the instant the session is declared expired. */
  get graceEndMonoMs(): number {
    return this.graceEnd;
  }

  /** The next instant at which tick() may change the state, or undefined once expired. */
  nextCheckMonoMs(): number | undefined {
    if (this.stateNow === 'safe') return this.deadline;
    if (this.stateNow === 'jeopardy') return this.graceEnd;
    return undefined;
  }

  /**
   * A heartbeat sent at sentMonoMs was answered: the session had
   * ttlMsRemaining left at the server. Returns 'safe' when this ends jeopardy.
   */
  renew(sentMonoMs: number, ttlMsRemaining: number, nowMonoMs: number): LeaseTransition | undefined {
    assert(sentMonoMs <= nowMonoMs, 'a heartbeat is answered after it was sent');
    assert(Number.isFinite(ttlMsRemaining) && ttlMsRemaining >= 0, `ttl_ms_remaining must be a non-negative number, got ${ttlMsRemaining}`);
    if (this.stateNow === 'expired') return undefined;
    const candidate = sentMonoMs + Math.min(ttlMsRemaining, this.config.ttlMs) - this.marginMs;
    // An answer can only extend the lease: an older heartbeat answered late says less than a newer one did.
    if (this.stateNow === 'safe') {
      if (candidate > this.deadline) {
        this.deadline = candidate;
        this.renewedFrom = sentMonoMs;
      }
      return this.tick(nowMonoMs);
    }
    // Jeopardy: the session survived, but only an answer that still leaves lease time makes it safe.
    if (candidate <= nowMonoMs) return undefined;
    this.stateNow = 'safe';
    this.deadline = candidate;
    this.renewedFrom = sentMonoMs;
    return 'safe';
  }

  /** The cell said the session is gone (expired answer, SESSION_NOT_FOUND), or the client closed it. */
  expire(): LeaseTransition | undefined {
    if (this.stateNow === 'expired') return undefined;
    this.stateNow = 'expired';
    return 'expired';
  }

  /** Applies the passage of time. At most one transition per call; call again until undefined. */
  tick(nowMonoMs: number): LeaseTransition | undefined {
    if (this.stateNow === 'safe' && nowMonoMs >= this.deadline) {
      this.stateNow = 'jeopardy';
      this.graceEnd = this.deadline + this.config.gracePeriodMs;
      return 'jeopardy';
    }
    if (this.stateNow === 'jeopardy' && nowMonoMs >= this.graceEnd) {
      this.stateNow = 'expired';
      return 'expired';
    }
    return undefined;
  }

  /** Send time of the heartbeat whose answer set the current lease. */
  get renewedFromMonoMs(): number {
    return this.renewedFrom;
  }
}
