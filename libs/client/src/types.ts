/**
 * The client's public shapes: plain objects with string modes, converted from
 * and to the generated protocol types at the edge (convert.ts).
 */

export type LockMode = 'exclusive' | 'shared';

/** The life of a session as the client sees it (Chubby's terms). */
export type SessionState = 'safe' | 'jeopardy' | 'expired';

export interface HolderInfo {
  readonly sessionId: string;
  readonly token: number;
  readonly mode: LockMode;
  readonly clientId: string;
}

export interface WaiterInfo {
  readonly sessionId: string;
  readonly mode: LockMode;
  readonly requestId: string;
  readonly clientId: string;
}

export interface LockInfo {
  readonly name: string;
  /** Mode of the current holders; 'free' when nobody holds it. */
  readonly mode: LockMode | 'free';
  readonly holders: readonly HolderInfo[];
  /** FIFO order, head first. */
  readonly waiters: readonly WaiterInfo[];
  /** A lock-delay is holding back the next grant after an expiry. */
  readonly delayed: boolean;
}

export interface LockReadResult {
  readonly lock: LockInfo;
  /** The revision the answer was read at (linearizable). */
  readonly revision: number;
}

export interface LockPage {
  readonly locks: readonly LockInfo[];
  /** Empty on the last page. */
  readonly nextPageToken: string;
  readonly revision: number;
}

export interface TokenCheck {
  /** The token belongs to a current holder of the lock. */
  readonly current: boolean;
  /** Highest token among the current holders; 0 when free. */
  readonly latestToken: number;
  readonly revision: number;
}

export type WatchEventType = 'snapshot' | 'acquired' | 'released' | 'expired' | 'queued' | 'canceled' | 'progress' | 'resync';

export interface WatchEventInfo {
  readonly type: WatchEventType;
  readonly revision: number;
  /** Empty for 'progress' and 'resync'. */
  readonly name: string;
  readonly sessionId: string;
  /** The holder's token for 'acquired', 'released' and 'expired'; 0 otherwise. */
  readonly token: number;
  /** The lock's state after the event ('snapshot' and change events). */
  readonly lock?: LockInfo;
}
