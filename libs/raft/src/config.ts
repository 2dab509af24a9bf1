/**
 * Defaults for RaftConfig and the checks a config must pass before a node
 * is built from it. The defaults follow ARCHITECTURE "Scale targets": with a
 * 100 ms tick, 10 ticks is the 1 s election timeout and 1 tick the 100 ms
 * heartbeat.
 */
import { assert } from '@fencer/base';
import type { NodeId, Random } from '@fencer/base';
import type { RaftConfig } from './api.js';
import type { RaftStorage } from './types.js';
import { bytesPerMsgMax, entriesPerMsgMax, inflightMsgsMax, snapshotBytesMax } from './limits.js';

export const DEFAULT_ELECTION_TICKS = 10;
export const DEFAULT_HEARTBEAT_TICKS = 1;
export const DEFAULT_MAX_ENTRIES_PER_MSG = 256;
export const DEFAULT_MAX_BYTES_PER_MSG = 1024 * 1024;
export const DEFAULT_MAX_INFLIGHT_MSGS = 256;
export const DEFAULT_SNAPSHOT_CHUNK_BYTES = 256 * 1024;

/** The required parts of a config; everything else takes the defaults above unless given. */
export type RaftConfigInput = { readonly id: NodeId; readonly storage: RaftStorage; readonly random: Random } & Partial<
  Omit<RaftConfig, 'id' | 'storage' | 'random'>
>;

export function defaultRaftConfig(input: RaftConfigInput): RaftConfig {
  // An override given as undefined means "the default", not "no value".
  const given = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as RaftConfigInput;
  return {
    electionTicks: DEFAULT_ELECTION_TICKS,
    heartbeatTicks: DEFAULT_HEARTBEAT_TICKS,
    preVote: true,
    checkQuorum: true,
    broadcastCommit: true,
    maxEntriesPerMsg: DEFAULT_MAX_ENTRIES_PER_MSG,
    maxBytesPerMsg: DEFAULT_MAX_BYTES_PER_MSG,
    maxInflightMsgs: DEFAULT_MAX_INFLIGHT_MSGS,
    snapshotChunkBytes: DEFAULT_SNAPSHOT_CHUNK_BYTES,
    ...given,
  };
}

/** Throws AssertionError on a config no node should run with. */
export function validateRaftConfig(config: RaftConfig): void {
  assert(typeof config.id === 'string' && config.id.length > 0, 'config.id must be a non-empty node id');
  assert(Number.isSafeInteger(config.heartbeatTicks) && config.heartbeatTicks > 0, 'heartbeatTicks must be a positive integer');
  assert(
    Number.isSafeInteger(config.electionTicks) && config.electionTicks > config.heartbeatTicks,
    `electionTicks (${config.electionTicks}) must be an integer above heartbeatTicks (${config.heartbeatTicks})`,
  );
  assert(
    Number.isSafeInteger(config.maxEntriesPerMsg) && config.maxEntriesPerMsg > 0 && config.maxEntriesPerMsg <= entriesPerMsgMax,
    `maxEntriesPerMsg must be in [1, ${entriesPerMsgMax}]`,
  );
  assert(
    Number.isSafeInteger(config.maxBytesPerMsg) && config.maxBytesPerMsg > 0 && config.maxBytesPerMsg <= bytesPerMsgMax,
    `maxBytesPerMsg must be in [1, ${bytesPerMsgMax}]`,
  );
  assert(
    Number.isSafeInteger(config.maxInflightMsgs) && config.maxInflightMsgs > 0 && config.maxInflightMsgs <= inflightMsgsMax,
    `maxInflightMsgs must be in [1, ${inflightMsgsMax}]`,
  );
  assert(
    Number.isSafeInteger(config.snapshotChunkBytes) && config.snapshotChunkBytes > 0 && config.snapshotChunkBytes <= snapshotBytesMax,
    'snapshotChunkBytes must be a positive integer',
  );
  const peers = config.peers ?? [];
  const learners = config.learners ?? [];
  assert(new Set(peers).size === peers.length, 'peers must be distinct');
  assert(new Set(learners).size === learners.length, 'learners must be distinct');
  assert(!learners.some((l) => peers.includes(l)), 'a node cannot be both a peer (voter) and a learner');
}
