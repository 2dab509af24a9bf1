/**
 * Sizes and bounds of the WAL, with how they relate asserted once at load.
 */
import { assert } from '@fencer/base';

/** Default segment size: big enough that rolling (a seal, an fsync, a switch) is rare. */
export const segmentBytesDefault = 64 * 1024 * 1024;
/** Smallest segment a store accepts (tests use small segments to roll often). */
export const segmentBytesMin = 4096;
/** Largest segment: offsets stay far inside 32-bit record length fields and 53-bit positions. */
export const segmentBytesMax = 1024 * 1024 * 1024;

/**
 * Most bytes written past the last fsync at any moment (one group-commit
 * batch). Recovery relies on it: damage farther than this past the first bad
 * record cannot be a torn write, so it is reported as corruption instead of
 * being truncated. A constant (not an option) because it must hold for logs
 * written by earlier runs.
 */
export const unsyncedBytesMax = 1024 * 1024;

/**
 * The unit a disk writes atomically at best (a sector). A write interrupted
 * by a power cut may keep any subset of its sectors, in any order; recovery
 * reads an all-zero sector of a zero-filled segment as one the write never
 * reached. A constant because it must hold for logs written by earlier runs.
 */
export const sectorBytes = 512;

/** Write+fdatasync cycles in flight at once: default, and most (each holds a file handle of the active segment). */
export const syncsInFlightDefault = 2;
export const syncsInFlightMax = 4;
/** A batch is split across free cycle slots only into parts of at least this many bytes. */
export const splitBytesMin = 4096;

/** Default number of snapshot files kept; the log is compacted only below the oldest kept. */
export const snapshotsKeptDefault = 2;
export const snapshotsKeptMax = 16;

/**
 * Saves and snapshots whose callbacks have not fired yet. The replica
 * bounds its own proposals far below this; reaching it means a caller
 * ignores callbacks, which is a bug.
 */
export const pendingCallbacksMax = 1 << 20;

/** Longest node id in a vote or a membership list, in UTF-8 bytes. */
export const nodeIdBytesMax = 1024;

assert(segmentBytesMin <= segmentBytesDefault && segmentBytesDefault <= segmentBytesMax, 'default segment size within bounds');
assert(unsyncedBytesMax <= segmentBytesDefault, 'one batch fits in a default segment');
assert(syncsInFlightDefault >= 1 && syncsInFlightDefault <= syncsInFlightMax, 'at least one cycle in flight');
assert(unsyncedBytesMax / syncsInFlightMax >= 64 * 1024, 'each cycle may still carry a sizeable batch');
assert(snapshotsKeptDefault >= 1 && snapshotsKeptDefault <= snapshotsKeptMax, 'keep at least the newest snapshot');
