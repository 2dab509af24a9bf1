/**
 * Durable log storage. The main entry is free of `node:` imports (the
 * replica and the simulator use it); the real disk is in `@fencer/wal/node`.
 */
export * from './raft-log-store.js';
export { type Disk, type DiskFile, joinPath, dirName, baseName } from './disk.js';
export { MemDisk, MemDiskError, type MemDiskOptions, type MemDiskOp, type CrashPolicy } from './mem-disk.js';
export { openRaftLogStore, entryBytesMax, type WalOptions, type WalStore, type RecoveryReport } from './wal-store.js';
export { WalCorruptionError } from './recover.js';
export { crc32c } from './crc32c.js';
export { decodeSnapshot as decodeSnapshotFile, snapshotFileName } from './snapshot-file.js';
export * as walLimits from './limits.js';
