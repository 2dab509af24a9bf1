/**
 * Heartbeats are answered only after the leader has confirmed it still leads
 * (one ReadIndex round, shared by every heartbeat that arrived before the
 * round began). A deposed leader that has not noticed yet therefore never
 * acknowledges a heartbeat: a client's lease, counted from when it sent the
 * heartbeat, ends no later than the fresh TTL a new leader grants at its
 * election, so the client never believes in a session the cell may expire.
 */
export type ConfirmRound = (done: (error: Error | null) => void) => void;

export class HeartbeatConfirmer {
  private waiting: ((error: Error | null) => void)[] = [];
  private inFlight = false;

  constructor(
    private readonly round: ConfirmRound,
    private readonly waitingMax: number,
  ) {}

  /** Runs `then` after a confirmation round that began after this call. False when too many are waiting. */
  confirm(then: (error: Error | null) => void): boolean {
    if (this.waiting.length >= this.waitingMax) return false;
    this.waiting.push(then);
    this.startRound();
    return true;
  }

  private startRound(): void {
    if (this.inFlight || this.waiting.length === 0) return;
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
