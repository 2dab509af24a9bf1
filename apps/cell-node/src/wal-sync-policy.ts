/**
 * Where a replica runs its WAL fdatasync: on its own event loop, or on
 * libuv's thread pool (`NodeDiskOptions.syncOnLoop` in `@fencer/wal/node`).
 *
 * On the loop a sync saves the pool's two wake-ups (see NodeDiskOptions),
 * but nothing else runs meanwhile. So a replica syncs on its loop when
 * nothing else is waiting on that loop:
 * - a follower whose last sync ended over `WAL_SYNC_ON_LOOP_IDLE_MS` ago.
 *   Its sync is on the commit path of every write (the leader counts its
 *   answer, sent once the sync is done), as with etcd's raft goroutine.
 * - a leader as idle, and serving at most one client call: it syncs after
 *   polling for I/O (its AppendEntries have left by then), so its own sync
 *   stops being the last of the majority to finish.
 * A busy replica stays on the pool, so it keeps reading appends and serving
 * calls, and starts the next write while a sync runs. So does a replica
 * whose last sync took over `WAL_SYNC_ON_LOOP_SLOW_MS`: on a slow or
 * contended disk, a sync on the loop would stall heartbeats and votes too.
 * 'always' puts every sync on the loop the same way (a follower at once, a
 * leader after polling for I/O), idle or not and however slow the last one
 * was: for a disk whose syncs are always short, and for tests of the loop
 * path on a disk that may be slow.
 * Figures: docs/benchmarks.md.
 */
import type { SyncPlace } from '@fencer/wal/node';

export const WAL_SYNC_ON_LOOP_MODES = ['when-idle', 'never', 'always'] as const;
export type WalSyncOnLoop = (typeof WAL_SYNC_ON_LOOP_MODES)[number];

/** A replica whose last sync ended longer ago than this counts as idle. */
export const WAL_SYNC_ON_LOOP_IDLE_MS = 0.5;

/** A last sync slower than this sends the next one to the pool, whatever else holds. */
export const WAL_SYNC_ON_LOOP_SLOW_MS = 5;

/** What the policy reads of the node, at each sync. */
export interface SyncPolicyView {
  isLeader(): boolean;
  /** Client calls this node is serving (received, not yet answered). */
  callsInFlight(): number;
}

/** The `syncOnLoop` choice for a node in `mode`; undefined means always the pool. */
export function walSyncOnLoop(mode: WalSyncOnLoop, node: SyncPolicyView): ((idleMs: number, lastSyncMs: number) => SyncPlace) | undefined {
  if (mode === 'never') return undefined;
  if (mode === 'always') return () => (node.isLeader() ? 'loop-after-io' : 'loop');
  return (idleMs, lastSyncMs) => {
    if (idleMs <= WAL_SYNC_ON_LOOP_IDLE_MS || lastSyncMs > WAL_SYNC_ON_LOOP_SLOW_MS) return 'pool';
    if (!node.isLeader()) return 'loop';
    return node.callsInFlight() <= 1 ? 'loop-after-io' : 'pool';
  };
}
