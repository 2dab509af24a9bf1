/**
 * The durable home of one replica's Raft state, as the replica composition
 * sees it: Raft's synchronous read view (`RaftStorage`) plus asynchronous,
 * callback-completed persistence. Callbacks (not promises) keep the
 * simulator deterministic: its in-memory disk completes them from its own
 * scheduler, in virtual time.
 *
 * Durability rule: `done(null)` means every byte of that call is on disk
 * (fsync, and directory fsync after a create or rename). An fsync error is
 * never retried: `done(err)` is called and the replica crashes.
 */
import type { LogIndex } from '@fencer/base';
import type { Entry, HardState, RaftStorage, Snapshot } from '@fencer/raft';
import type { Disk } from './disk.js';
import type { WalOptions } from './wal-store.js';

export type Done = (err: Error | null) => void;

export interface RaftLogStore extends RaftStorage {
  /**
   * Appends entries (a first index at or below lastIndex() truncates the
   * old suffix from there) and records the hard state, if given. The read
   * view reflects the call at once; `done` fires once it is durable. Calls
   * that arrive while an fsync is in flight share the next fsync (group
   * commit); `done` callbacks fire in call order.
   */
  save(hardState: HardState | undefined, entries: readonly Entry[], done: Done): void;
  /**
   * Stores a snapshot (taken locally or received from the leader): written
   * to a temporary name, fsynced, renamed, directory fsynced. Entries at or
   * below its index are dropped from the read view, and whole segments
   * below it are deleted. A received snapshot newer than the log replaces
   * the log entirely.
   */
  saveSnapshot(snapshot: Snapshot, done: Done): void;
  /** Releases file handles; pending callbacks still fire. */
  close(done: Done): void;
}

/**
 * Opens (recovering) or creates a store in `dir` on `disk`; `openRaftLogStore`
 * in wal-store.ts is the implementation. Recovery errors (a corrupt log)
 * arrive as `done(err)`; the replica must refuse to start.
 */
export type OpenRaftLogStore = (
  disk: Disk,
  dir: string,
  options: WalOptions,
  done: (err: Error | null, store?: RaftLogStore) => void,
) => void;

export type { LogIndex };
