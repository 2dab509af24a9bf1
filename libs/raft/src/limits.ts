/**
 * Every queue and buffer in the core that grows with input has a limit, and
 * the limits live here (CONTRIBUTING.md, "Limits"). Configurable knobs (batch
 * sizes, the in-flight window) are in RaftConfig; these bound them and the
 * internal queues that the configuration does not name.
 */
import { assert } from '@fencer/base';

/** Upper bound for RaftConfig.maxInflightMsgs: the in-flight ring is allocated at this size at most. */
export const inflightMsgsMax = 4096;

/**
 * Leader: most entries appended but not yet committed. Past it, propose()
 * refuses (returns null): an isolated leader must not grow its log without
 * bound while check-quorum waits to depose it.
 */
export const uncommittedEntriesMax = 8192;

/** ReadIndex requests queued on a leader (waiting for its blank entry or for a heartbeat round). */
export const pendingReadIndexMax = 4096;

/** Most bytes of committed entries handed out in one Ready (the rest come in the next one). */
export const committedBytesPerReadyMax = 16 * 1024 * 1024;

/** A follower refuses to assemble a snapshot larger than this (it would not fit in one buffer). */
export const snapshotBytesMax = 1024 * 1024 * 1024;

/** Bytes read per storage call while scanning the log for membership changes at start. */
export const startupScanBytes = 16 * 1024 * 1024;

/** Entries in one AppendEntries, and bytes, may not exceed these whatever the config says. */
export const entriesPerMsgMax = 65_536;
export const bytesPerMsgMax = 64 * 1024 * 1024;

/**
 * Highest term and log position a peer's message may name. No honest cell
 * gets near it (one election a millisecond for thousands of years), so a
 * message above it is forged or corrupt; refusing it keeps term + 1 and
 * index + entries exact in float64 arithmetic.
 */
export const termMax = 2 ** 48;
export const indexMax = 2 ** 48;

assert(termMax * 2 < Number.MAX_SAFE_INTEGER && indexMax + entriesPerMsgMax < Number.MAX_SAFE_INTEGER, 'terms and indexes stay exact');
assert(inflightMsgsMax > 0 && inflightMsgsMax <= uncommittedEntriesMax, 'the in-flight window fits in the uncommitted tail');
assert(committedBytesPerReadyMax >= bytesPerMsgMax / 4, 'a Ready can carry at least a quarter of a full append');
assert(snapshotBytesMax > bytesPerMsgMax, 'snapshots are chunked, so they may exceed one message');
