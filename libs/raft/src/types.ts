/**
 * The data Raft persists, sends and applies. These shapes are shared by the
 * core (this lib), the storage (`@fencer/wal`), the replica composition and
 * the simulator. Names follow the Raft paper's Figure 2 and etcd's raft.
 */
import type { LogIndex, NodeId, Term } from '@fencer/base';

export const EntryType = {
  /** Application command (or an empty blank entry a new leader appends). */
  Normal: 0,
  /** Membership change; `data` encodes a ConfChange (see conf-change.ts). */
  ConfChange: 1,
} as const;
export type EntryType = (typeof EntryType)[keyof typeof EntryType];

export interface Entry {
  readonly term: Term;
  readonly index: LogIndex;
  readonly type: EntryType;
  /** Opaque to Raft. Empty for the leader's blank entry. */
  readonly data: Uint8Array;
}

/** Figure 2's persistent state, plus the commit index (so it never goes backwards across restarts). */
export interface HardState {
  readonly term: Term;
  readonly vote: NodeId | null;
  readonly commit: LogIndex;
}

export interface ConfState {
  readonly voters: readonly NodeId[];
  readonly learners: readonly NodeId[];
}

export interface SnapshotMeta {
  readonly index: LogIndex;
  readonly term: Term;
  readonly conf: ConfState;
}

export interface Snapshot {
  readonly meta: SnapshotMeta;
  /** The state machine's serialised state at meta.index; opaque to Raft. */
  readonly data: Uint8Array;
}

export const ConfChangeType = {
  AddVoter: 0,
  AddLearner: 1,
  RemoveNode: 2,
} as const;
export type ConfChangeType = (typeof ConfChangeType)[keyof typeof ConfChangeType];

export interface ConfChange {
  readonly type: ConfChangeType;
  readonly node: NodeId;
}

/**
 * Storage's read view, used synchronously by the core (like etcd's
 * `Storage`). Entries below firstIndex() are compacted into the snapshot.
 * The durable implementation lives in `@fencer/wal`; `MemoryStorage` here is
 * for tests.
 */
export interface RaftStorage {
  /** Hard state and membership as recovered at start. */
  initialState(): { hardState: HardState; conf: ConfState };
  /** Entries in [lo, hi), at least one if any exist, stopping before maxBytes of data is exceeded. */
  entries(lo: LogIndex, hi: LogIndex, maxBytes: number): Entry[];
  /** Term of the entry at index; valid for firstIndex()-1 (the snapshot's) through lastIndex(). */
  term(index: LogIndex): Term;
  /** Index of the first entry still in the log (snapshot index + 1). */
  firstIndex(): LogIndex;
  lastIndex(): LogIndex;
  /** The latest snapshot (an empty one with index 0 when none was taken). */
  snapshot(): Snapshot;
}
