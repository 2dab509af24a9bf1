/**
 * Goal: defaultRaftConfig gives the documented defaults and keeps
 * overrides; validateRaftConfig refuses configs no node should run with.
 * Method: direct cases.
 */
import { describe, expect, it } from 'vitest';
import { AssertionError, NodeId, SeededRandom } from '@fencer/base';
import { defaultRaftConfig, validateRaftConfig } from './config.js';
import { MemoryStorage } from './memory-storage.js';

describe('defaultRaftConfig', () => {
  it('fills the defaults, keeps overrides, and treats an undefined override as the default', () => {
    const c = defaultRaftConfig({
      id: NodeId('n'),
      storage: new MemoryStorage(),
      random: new SeededRandom(1),
      maxInflightMsgs: 8,
      electionTicks: undefined as unknown as number,
    });
    expect([
      c.electionTicks,
      c.heartbeatTicks,
      c.maxEntriesPerMsg,
      c.maxBytesPerMsg,
      c.maxInflightMsgs,
      c.snapshotChunkBytes,
      c.preVote,
      c.checkQuorum,
      c.broadcastCommit,
    ]).toEqual([10, 1, 256, 1024 * 1024, 8, 64 * 1024, true, true, false]);
  });

  it('validation refuses an election timeout not above the heartbeat, a node both voter and learner, a zero window', () => {
    const c = defaultRaftConfig({ id: NodeId('n'), storage: new MemoryStorage(), random: new SeededRandom(1) });
    expect(() => validateRaftConfig(c)).not.toThrow();
    expect(() => validateRaftConfig({ ...c, electionTicks: 1 })).toThrow(AssertionError);
    expect(() => validateRaftConfig({ ...c, peers: [NodeId('a')], learners: [NodeId('a')] })).toThrow(AssertionError);
    expect(() => validateRaftConfig({ ...c, maxInflightMsgs: 0 })).toThrow(AssertionError);
  });
});
