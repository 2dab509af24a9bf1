/**
 * The public shapes of the lock state machine: lock states, events and the
 * outcome of every command. All plain values: every replica computes the
 * same ones, and the server maps them onto the contract's messages.
 */
import type { ErrorCode, Namespace, RequestId, Revision, SessionId } from '@fencer/base';
import type { NamespaceQuotas } from './quotas.js';
import type { NamespaceCredentials } from './credentials.js';

export type LockMode = 'EXCLUSIVE' | 'SHARED';

/** One holder of a lock. Immutable: the state machine shares these objects between its state, events and outcomes. */
export interface Holder {
  readonly sessionId: SessionId;
  readonly clientId: string;
  readonly mode: LockMode;
  /** Fencing token: the revision of the entry that granted this hold. */
  readonly token: Revision;
  /** Lock-delay this holder asked for: applied only if its session expires while holding. */
  readonly lockDelayMs: number;
}

/** One FIFO waiter of a lock. Immutable, like Holder. */
export interface Waiter {
  readonly sessionId: SessionId;
  readonly clientId: string;
  readonly mode: LockMode;
  readonly requestId: RequestId;
  /** How long the client asked to wait: the leader's deadline tracker uses it; the state machine only records it. */
  readonly waitMs: number;
  /** Lock-delay the holder will carry once granted. */
  readonly lockDelayMs: number;
  /** Revision of the entry that queued this waiter. */
  readonly queuedRevision: Revision;
}

/** The contract's LockState. A free lock has no holders, no waiters and mode null. */
export interface LockState {
  readonly name: string;
  /** Mode of the current holders; null when nobody holds the lock (the contract's UNSPECIFIED). */
  readonly mode: LockMode | null;
  readonly holders: readonly Holder[];
  /** FIFO order, head first. */
  readonly waiters: readonly Waiter[];
  /** A lock-delay after an expiry holds back the next grant. */
  readonly delayed: boolean;
}

/** The contract's WatchEvent types that an applied entry can produce (SNAPSHOT and PROGRESS are the server's). */
export type LockEventType = 'ACQUIRED' | 'RELEASED' | 'EXPIRED' | 'QUEUED' | 'CANCELED';

export interface LockEvent {
  readonly type: LockEventType;
  /** Revision of the entry that produced the event; every event of one entry shares it. */
  readonly revision: Revision;
  readonly name: string;
  readonly sessionId: SessionId;
  /** The holder's token for ACQUIRED, RELEASED and for EXPIRED of a holder; 0 otherwise. */
  readonly token: Revision;
  /** The request that was granted, queued or cancelled, or the waiter that left (so the leader can answer held-open calls). */
  readonly requestId: RequestId | null;
  /** The lock's state after the whole entry was applied (what GetLock at `revision` returns). */
  readonly lock: LockState;
}

/** The outcome codes the state machine returns: a subset of the contract's reasons (@fencer/base ErrorCode). */
export type FsmErrorCode = Extract<
  ErrorCode,
  | 'INVALID_NAME'
  | 'INVALID_MODE'
  | 'INVALID_TTL'
  | 'MISSING_REQUEST_ID'
  | 'WRONG_NAMESPACE'
  | 'SESSION_NOT_FOUND'
  | 'NAMESPACE_MOVING'
  | 'NAMESPACE_NOT_HERE'
  | 'QUOTA_EXCEEDED'
  | 'INVALID_ARGUMENT'
  | 'MOVE_FENCED'
>;

export interface Failure {
  readonly ok: false;
  readonly code: FsmErrorCode;
  readonly message: string;
}

export type NamespaceState = 'active' | 'frozen' | 'moved';
export type CancelReason = 'timed-out' | 'cancelled';
/** Why an Acquire ended TIMED_OUT: a try-lock found the lock busy, or the waiter was removed. */
export type TimedOutReason = 'busy' | CancelReason;

export type AcquireOutcome =
  | {
      readonly ok: true;
      readonly status: 'GRANTED';
      readonly token: Revision;
      /** Holders at the entry that produced this answer. */
      readonly holders: readonly Holder[];
      /** Revision at which the grant was decided (equals token). */
      readonly revision: Revision;
      /** True when this answer replays an earlier outcome of the same request id. */
      readonly deduped: boolean;
    }
  | {
      readonly ok: true;
      readonly status: 'QUEUED';
      /** 0 = head of the queue; computed at the entry that produced this answer. */
      readonly position: number;
      readonly revision: Revision;
      readonly deduped: boolean;
    }
  | {
      readonly ok: true;
      readonly status: 'TIMED_OUT';
      readonly reason: TimedOutReason;
      readonly revision: Revision;
      readonly deduped: boolean;
    };

export interface OpenSessionOutcome {
  readonly ok: true;
  readonly sessionId: SessionId;
  readonly ttlMs: number;
  /** This entry claimed the namespace for the cell (auto-claim mode). */
  readonly claimed: boolean;
  /** The session already existed with the same client id and TTL (a re-proposed entry). */
  readonly existed: boolean;
}

/** A lock held back by lock-delay: the leader schedules LiftLockDelay(name, delayRevision) after delayMs. */
export interface DelayedLock {
  readonly name: string;
  readonly delayMs: number;
  readonly delayRevision: Revision;
}

export interface CloseSessionOutcome {
  readonly ok: true;
  /** Names the session held, sorted. */
  readonly released: readonly string[];
}

export interface ExpireSessionOutcome extends CloseSessionOutcome {
  /** Locks that this expiry put under lock-delay. */
  readonly delayed: readonly DelayedLock[];
}

export interface ReleaseOutcome {
  readonly ok: true;
  /** False for a stale token, a lock not held by this session, or a free lock: a no-op. */
  readonly released: boolean;
}

export interface CancelWaitOutcome {
  readonly ok: true;
  /** False when the request was not waiting (already granted, cancelled, or unknown): a no-op. */
  readonly cancelled: boolean;
}

export interface NoopOutcome {
  readonly ok: true;
}

export interface LiftLockDelayOutcome {
  readonly ok: true;
  /** False when the lock is not under the delay that began at delayRevision (already lifted or superseded). */
  readonly lifted: boolean;
}

export interface NamespaceChangeOutcome {
  readonly ok: true;
  /** False when the namespace already was in the requested state. */
  readonly changed: boolean;
}

export interface ExportNamespaceOutcome {
  readonly ok: true;
  /** Everything of the namespace; feed it to ImportNamespace on another cell. */
  readonly data: Uint8Array;
  /** Every revision the namespace has seen is at most this one (the export entry's revision). */
  readonly highestRevision: Revision;
  /** The last revision that changed the namespace (its freeze): no event of it lies between this and highestRevision. */
  readonly namespaceRevision: Revision;
  readonly sessions: number;
  readonly locks: number;
}

export interface ImportNamespaceOutcome {
  readonly ok: true;
  /** The cell's revision base after the import. */
  readonly revisionBase: number;
  readonly sessions: number;
  readonly locks: number;
  /** The export's highestRevision and namespaceRevision: the namespace had no event between the latter and this entry. */
  readonly highestRevision: Revision;
  readonly namespaceRevision: Revision;
}

export interface StageImportOutcome {
  readonly ok: true;
  /** Bytes of the export staged now, from offset 0. */
  readonly stagedBytes: number;
}

/** Where a member of the cell listens, as replicated by SetMemberAddress. */
export interface MemberAddress {
  /** Lock-service (and admin-routing) gRPC address, host:port. */
  readonly address: string;
  /** Raft peer transport address, host:port. */
  readonly peerAddress: string;
}

export interface MemberChangeOutcome {
  readonly ok: true;
  /** False when the directory already said so. */
  readonly changed: boolean;
}

export interface DropNamespaceOutcome {
  readonly ok: true;
  readonly sessions: number;
  readonly locks: number;
}

/** What a read helper reports about a session (for the leader's deadline tracker). */
export interface SessionInfo {
  readonly sessionId: SessionId;
  readonly clientId: string;
  readonly namespace: Namespace;
  readonly ttlMs: number;
  readonly openedRevision: Revision;
  readonly heldCount: number;
  readonly waitingCount: number;
}

/** A waiter as the leader's wait-deadline tracker needs it. */
export interface WaiterInfo {
  readonly sessionId: SessionId;
  readonly name: string;
  readonly requestId: RequestId;
  readonly waitMs: number;
  readonly queuedRevision: Revision;
}

export interface NamespaceInfo {
  readonly namespace: Namespace;
  readonly state: NamespaceState;
  /** Highest revision of an entry that changed this namespace. */
  readonly lastRevision: Revision;
  readonly sessions: number;
  readonly locks: number;
  /** Waiters over every lock of the namespace. */
  readonly waiters: number;
  /** The tenant's quotas as replicated here (0 = none). */
  readonly quotas: NamespaceQuotas;
  /** The tenant's token hashes as replicated here (empty = none). */
  readonly credentials: NamespaceCredentials;
}

export interface CheckTokenAnswer {
  /** The token belongs to a current holder of the lock. */
  readonly current: boolean;
  /** Highest token among the current holders; 0 when free. */
  readonly latestToken: Revision;
}

export interface ListLocksPage {
  readonly ok: true;
  /** Ordered by name. */
  readonly locks: readonly LockState[];
  /** Empty on the last page. */
  readonly nextPageToken: string;
}
