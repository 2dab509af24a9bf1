/**
 * Test doubles for the WAL's `Disk` seam (`@fencer/wal/testing`): the
 * in-memory disk that loses what a crash may lose (unsynced writes, torn at
 * a byte or at sector/page granularity; directory changes not covered by a
 * directory fsync), and a disk that lies about durability, for negative
 * controls. Free of `node:` modules, like the main entry.
 */
export { MemDisk, MemDiskError, type MemDiskOptions, type MemDiskOp, type CrashPolicy } from './mem-disk.js';
export { lyingDisk, type DiskLie } from './lying-disk.js';
