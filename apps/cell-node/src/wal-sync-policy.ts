/**
 * Where a replica runs its WAL fdatasync: on its own event loop, or on
 * libuv's thread pool (`NodeDiskOptions.syncOnLoop` in `@fencer/wal/node`).
 *
 * A follower's sync is on the commit path of every write: the leader counts
 * the follower's answer, sent only once the sync is done. Through the pool
 * that sync costs two extra wake-ups (loop to worker, worker to loop); on
 * the loop it costs only the fdatasync. So an idle follower syncs on its
 * loop, as etcd's raft goroutine does. Two cases stay on the pool:
 * - a busy follower (its last sync ended less than `WAL_SYNC_ON_LOOP_IDLE_MS`
 *   ago): the pool lets it keep reading appends and start the next write
 *   while a sync runs;
 * - the leader: its AppendEntries leave before its own sync, and its loop
 *   must stay free to read the answers and serve clients meanwhile; its own
 *   sync is rarely the last of the majority to finish.
 * Figures: docs/benchmarks.md, "Fourth session".
 */

export const WAL_SYNC_ON_LOOP_MODES = ['idle-follower', 'never'] as const;
export type WalSyncOnLoop = (typeof WAL_SYNC_ON_LOOP_MODES)[number];

/** A follower whose last sync ended longer ago than this counts as idle. */
export const WAL_SYNC_ON_LOOP_IDLE_MS = 0.5;

/** The `syncOnLoop` predicate for a node in `mode`; `isLeader` is read at each sync. */
export function walSyncOnLoop(mode: WalSyncOnLoop, isLeader: () => boolean): ((idleMs: number) => boolean) | undefined {
  if (mode === 'never') return undefined;
  return (idleMs) => idleMs > WAL_SYNC_ON_LOOP_IDLE_MS && !isLeader();
}
