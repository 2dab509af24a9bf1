/**
 * The client's own outcomes, beyond the FencerError codes of the protocol.
 * Both are ordinary values a caller switches on by class or `.reason`.
 */
import type { HolderInfo } from './types.js';

/** acquire() did not get the lock within its wait (with waitMs 0: the lock is held). */
export class LockTimeoutError extends Error {
  override readonly name = 'LockTimeoutError';

  constructor(
    readonly lockName: string,
    /** Holders when the attempt ended. */
    readonly holders: readonly HolderInfo[],
    /** Revision at which the outcome was decided. */
    readonly revision: number,
    readonly waitMs: number,
  ) {
    super(
      waitMs === 0
        ? `${lockName} is held (by ${holders.length === 0 ? 'a session being released, or a lock-delay' : holders.map((h) => h.clientId || h.sessionId).join(', ')})`
        : `${lockName} was not granted within ${waitMs} ms`,
    );
  }
}

/** Why a lock handle's signal aborted. */
export type LockLostReason = 'jeopardy' | 'expired' | 'released' | 'closed';

/**
 * The reason carried by a lock handle's AbortSignal. 'jeopardy': the lease
 * may be lost, stop writing now (the lock may still be held if the session
 * turns safe). 'expired': the lock is gone. 'released' and 'closed': this
 * process let it go.
 */
export class LockLostError extends Error {
  override readonly name = 'LockLostError';

  constructor(
    readonly reason: LockLostReason,
    readonly lockName: string,
    readonly token: number,
  ) {
    super(
      reason === 'jeopardy'
        ? `${lockName} (token ${token}) may be lost: the session is in jeopardy; stop writing`
        : reason === 'expired'
          ? `${lockName} (token ${token}) is lost: the session expired`
          : `${lockName} (token ${token}) was ${reason === 'released' ? 'released' : 'let go: the client closed'}`,
    );
  }
}
