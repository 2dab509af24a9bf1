/**
 * A held lock: its name, mode and fencing token, and an AbortSignal that
 * aborts the moment the holder must stop acting on it — when its session
 * enters jeopardy (the lease may be lost) or expires, or when it is released.
 * Pass `handle.token` to every resource you write, and `handle.signal` to
 * every operation you start.
 */
import { LockLostError, type LockLostReason } from './errors.js';
import type { Session } from './session.js';
import type { LockMode } from './types.js';

export type Releaser = (handle: LockHandle) => Promise<boolean>;

export class LockHandle {
  private readonly controller = new AbortController();
  private releasing: Promise<boolean> | undefined;
  private lostReason: LockLostReason | undefined;

  constructor(
    readonly name: string,
    readonly mode: LockMode,
    /** The fencing token: the revision of the grant; every later grant of this name has a larger one. */
    readonly token: number,
    readonly session: Session,
    private readonly releaser: Releaser,
  ) {}

  /** Aborts (with a LockLostError) at jeopardy, expiry, release or client close. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /**
   * The lock is still ours as far as the client knows: not released, the
   * session not expired or closed. True in jeopardy too (the lock may still
   * be held); check `signal.aborted` before acting.
   */
  get held(): boolean {
    return this.lostReason !== 'expired' && this.lostReason !== 'closed' && this.releasing === undefined;
  }

  /** Why the signal aborted, if it did. */
  get lostBecause(): LockLostReason | undefined {
    return this.lostReason;
  }

  /**
   * Releases the lock. Resolves true when the cell released it, false when
   * it was no longer held (session expired, or a stale token). Idempotent.
   */
  release(): Promise<boolean> {
    if (!this.releasing) {
      this.releasing = this.lostReason === 'expired' || this.lostReason === 'closed' ? Promise.resolve(false) : this.releaser(this);
      // Abort after the release settles: the holder keeps its signal until it asked to let go.
      this.releasing.then(
        () => this.lose('released'),
        () => this.lose('released'),
      );
    }
    return this.releasing;
  }

  /** Called by the session and by release(). The first call aborts the signal; 'expired'/'closed' record that the lock is gone. */
  lose(reason: LockLostReason): void {
    if (reason === 'expired' || reason === 'closed') this.lostReason = reason;
    else if (this.lostReason === undefined) this.lostReason = reason;
    if (!this.controller.signal.aborted) this.controller.abort(new LockLostError(reason, this.name, this.token));
  }
}
