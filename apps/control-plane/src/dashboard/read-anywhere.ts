/**
 * A linearizable read of the meta group's state on any instance, for the
 * routes a follower serves itself (the dashboard). The group's own
 * `read()` confirms leadership with a ReadIndex round, so only the leader
 * can serve it. A follower asks the leader for a read index instead (the
 * leader runs its ReadIndex round, then answers the index it has applied,
 * which is at least the round's commit index), and waits until it has
 * applied that index itself: every write committed before the follower
 * asked is then in its state (Raft's read on followers, thesis §6.4).
 */
import type { MetaStateMachine } from '@fencer/meta-fsm';
import type { MetaStore } from '../meta-group.js';
import { appliedHere, leaderIndex } from '../http/follower-reads.js';
import { dashboardReadTimeoutMs } from '../limits.js';

/**
 * The state once it reflects every write committed before this call, on the
 * leader or a follower. A follower asks the leader's read index where the
 * routing reads do (http/follower-reads.ts, READ_INDEX_PATH), as a member
 * of the group, with the admin token.
 */
export async function readAnywhere(meta: MetaStore, adminToken: string | undefined): Promise<MetaStateMachine> {
  if (meta.isLeader) return meta.read();
  const until = Date.now() + dashboardReadTimeoutMs;
  const index = await leaderIndex(meta, adminToken, dashboardReadTimeoutMs);
  await appliedHere(meta, index, Math.max(1, until - Date.now()));
  return meta.state;
}

/** `meta` with `read()` served on any instance (for code that takes a MetaStore, such as the access checks). */
export function readableAnywhere(meta: MetaStore, adminToken: string | undefined): MetaStore {
  return {
    write: (entry) => meta.write(entry),
    read: () => readAnywhere(meta, adminToken),
    get state() {
      return meta.state;
    },
    get isLeader() {
      return meta.isLeader;
    },
    get leader() {
      return meta.leader;
    },
    leaderAddress: () => meta.leaderAddress(),
    waitRouting: (sinceVersion, waitMs, done) => meta.waitRouting(sinceVersion, waitMs, done),
    get appliedIndex() {
      return meta.appliedIndex;
    },
    waitApplied: (index, waitMs, done) => meta.waitApplied(index, waitMs, done),
  };
}
