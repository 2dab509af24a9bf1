/**
 * The one set of defaults for RaftConfig, and the checks a config must pass
 * before a node is built from it. Every caller (the replica, the cell node,
 * the simulator, the tests) starts from `raftTuningDefault` and overrides
 * only what it means to; nothing else restates a default.
 *
 * With a 100 ms tick, 10 ticks is a 1 s election timeout (etcd's default) and
 * 1 tick a 100 ms heartbeat. A commit reaches followers with the next
 * append or heartbeat (broadcastCommit off): eager commit appends cost the
 * leader a message per follower per commit at low load (docs/benchmarks.md).
 */
import { assert } from '@fencer/base';
import type { NodeId, Random } from '@fencer/base';
import type { RaftConfig, RaftTuning } from './api.js';
import type { RaftStorage } from './types.js';
import { bytesPerMsgMax, entriesPerMsgMax, inflightMsgsMax, snapshotBytesMax } from './limits.js';

export const raftTuningDefault: RaftTuning = Object.freeze({
  electionTicks: 10,
  heartbeatTicks: 1,
  preVote: true,
  checkQuorum: true,
  broadcastCommit: false,
  maxEntriesPerMsg: 256,
  maxBytesPerMsg: 1024 * 1024,
  maxInflightMsgs: 64,
  snapshotChunkBytes: 64 * 1024,
});

/** The required parts of a config; everything else takes `raftTuningDefault` unless given. */
export type RaftConfigInput = { readonly id: NodeId; readonly storage: RaftStorage; readonly random: Random } & Partial<
  Omit<RaftConfig, 'id' | 'storage' | 'random'>
>;

export function defaultRaftConfig(input: RaftConfigInput): RaftConfig {
  return { ...raftTuningDefault, ...withoutUndefined(input) };
}

/** `raftTuningDefault` with the given overrides; an override given as undefined means "the default". */
export function raftTuning(overrides: Partial<RaftTuning> = {}): RaftTuning {
  return { ...raftTuningDefault, ...withoutUndefined(overrides) };
}

function withoutUndefined<T extends object>(input: T): T {
  return Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as T;
}

/** Throws AssertionError on a config no node should run with. */
export function validateRaftConfig(config: RaftConfig): void {
  assert(typeof config.id === 'string' && config.id.length > 0, 'config.id must be a non-empty node id');
  assert(Number.isSafeInteger(config.heartbeatTicks) && config.heartbeatTicks > 0, 'heartbeatTicks must be a positive integer');
  assert(
    Number.isSafeInteger(config.electionTicks) && config.electionTicks > config.heartbeatTicks,
    `electionTicks (${config.electionTicks}) must be an integer above heartbeatTicks (${config.heartbeatTicks})`,
  );
  const idle = config.idleHeartbeatTicks;
  assert(
    idle === undefined || (Number.isSafeInteger(idle) && idle >= config.heartbeatTicks && idle < config.electionTicks),
    `idleHeartbeatTicks (${idle}) must be an integer from heartbeatTicks (${config.heartbeatTicks}) to below electionTicks (${config.electionTicks})`,
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
