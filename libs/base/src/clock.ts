/**
 * Time enters the system only through this interface, so the simulator can
 * substitute virtual time. Monotonic time is for deadlines (leases, waits);
 * wall time is for humans and logs, never for correctness.
 */
export interface Clock {
  /** Milliseconds on a monotonic clock with an arbitrary origin; never goes backwards. */
  monoMs(): number;
  /** Milliseconds since the Unix epoch; may jump. */
  wallMs(): number;
}

/** A clock a test or simulator moves by hand. */
export class ManualClock implements Clock {
  private mono: number;
  private wallOffsetMs: number;

  constructor(startMonoMs = 0, wallOffsetMs = 1_700_000_000_000) {
    this.mono = startMonoMs;
    this.wallOffsetMs = wallOffsetMs;
  }

  monoMs(): number {
    return this.mono;
  }

  wallMs(): number {
    return this.mono + this.wallOffsetMs;
  }

  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`a monotonic clock cannot go back (advance ${ms})`);
    this.mono += ms;
  }

  /** Shifts only the wall clock (clock skew); monotonic time is unaffected. */
  skewWall(ms: number): void {
    this.wallOffsetMs += ms;
  }
}
