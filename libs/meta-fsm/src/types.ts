/**
 * The records of the meta state machine. Times are wall-clock milliseconds
 * stamped by the proposer into the command (apply never reads a clock), so
 * every replica stores the same values.
 */

export interface Quotas {
  readonly maxSessions?: number;
  readonly maxLocks?: number;
  readonly maxWaiters?: number;
  readonly acquiresPerSecond?: number;
}

/** A tenant credential, stored only as a hash. A rotated-out one stays valid until `validUntilMs`. */
export interface TokenHash {
  readonly hash: string;
  readonly validUntilMs?: number;
}

export interface Tenant {
  /** The tenant's name is its namespace. */
  readonly namespace: string;
  readonly cell: string;
  readonly owner?: string;
  readonly createdAtMs: number;
  readonly quotas: Quotas;
  readonly tokenHashes: readonly TokenHash[];
}

/** A route is the contract's routing-table entry: the meta group writes the table routers parse. */
export type { Route, RouteState } from '@fencer/contract';

/** A move's states in the only order they may be taken; `failed` may follow any unfinished one. */
export const MOVE_STATES = ['queued', 'freezing', 'copying', 'switching', 'cleaning', 'done', 'failed'] as const;
export type MoveState = (typeof MOVE_STATES)[number];

export interface Move {
  readonly id: string;
  readonly namespace: string;
  readonly fromCell: string;
  readonly toCell: string;
  readonly state: MoveState;
  readonly createdAtMs: number;
  readonly finishedAtMs?: number;
  readonly error?: string;
  /** The namespace's revision when it froze (its last change); the target continues above it. */
  readonly revision?: number;
  /** Sessions and lock records carried to the target. */
  readonly sessions?: number;
  readonly locks?: number;
  /** Time the namespace refused writes: from the freeze to the first write the target served. */
  readonly unavailableMs?: number;
  /** Set by RollBackMove: the move is being given back to its source for this reason, and ends 'failed'. */
  readonly rollingBack?: string;
  /**
   * When the move entered each state it took (the proposer's wall clock): 'freezing' is journaled before the
   * source freezes and 'cleaning' after the target unfroze, so the two bound the time writes were refused.
   */
  readonly stateAtMs?: Readonly<Partial<Record<MoveState, number>>>;
  /**
   * The meta log index of the entry that last changed the move (StartMove, AdvanceMove, RollBackMove). A move's
   * cell steps carry it in their fence (docs/decisions/0019-the-move-worker.md): a cell refuses a step decided
   * from an earlier state than one it applied a step of. Absent in moves journaled before it existed (read as 0).
   */
  readonly journalIndex?: number;
}

/** What an AdvanceMove may record about the move as it goes (each set once, at most). */
export const MOVE_FIGURES = ['revision', 'sessions', 'locks', 'unavailableMs'] as const;
export type MoveFigure = (typeof MOVE_FIGURES)[number];

export const SNAPSHOT_STATES = ['uploading', 'done', 'failed'] as const;
export type SnapshotState = (typeof SNAPSHOT_STATES)[number];

export interface SnapshotRecord {
  readonly id: string;
  readonly cell: string;
  readonly state: SnapshotState;
  readonly createdAtMs: number;
  readonly index?: number;
  readonly bytes?: number;
  readonly sha256?: string;
  readonly location?: string;
  readonly error?: string;
}

/** Stable codes of refused commands; the control plane maps each to an HTTP status (they are the contract's codes). */
export type MetaErrorCode =
  | 'TENANT_EXISTS'
  | 'TENANT_NOT_FOUND'
  | 'MOVE_IN_PROGRESS'
  | 'MOVE_NOT_FOUND'
  | 'ALREADY_THERE'
  | 'SNAPSHOT_NOT_FOUND'
  | 'INVALID_REQUEST'
  | 'QUOTA_EXCEEDED'
  | 'IDEMPOTENCY_KEY_REUSED';

export interface MetaFailure {
  readonly ok: false;
  readonly code: MetaErrorCode;
  readonly detail: string;
}
