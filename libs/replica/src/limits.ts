/**
 * Every queue and map in the replica that grows with client input has a
 * limit, kept here with the relations between them asserted once at load.
 */
import { assert } from '@fencer/base';

/** Proposals handed to Raft and not yet applied (or failed). A full table answers TOO_MANY_REQUESTS. */
export const pendingProposalsMax = 8192;

/** ReadIndex requests waiting for their index or for the apply to catch up. */
export const pendingReadsMax = 4096;

/** Largest command a client may propose; bigger ones are INVALID_ARGUMENT (Raft batches by bytes too). */
export const proposalBytesMax = 1024 * 1024;

/** Defaults a config may override. */
export const snapshotEveryEntriesDefault = 10_000;
/** A read not served within this many ticks fails with DEADLINE_EXCEEDED (the core may drop a ReadIndex it cannot serve). */
export const readTimeoutTicksDefault = 30;

assert(pendingReadsMax <= pendingProposalsMax, 'reads are cheaper than writes but must not outnumber their bound');
assert(snapshotEveryEntriesDefault > 0 && readTimeoutTicksDefault > 0, 'positive defaults');
