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
import { dashboardReadTimeoutMs } from '../limits.js';
import { ProblemError } from '../problems.js';

/** The leader's route answering a read index (routes/dashboard.ts). */
export const READ_INDEX_PATH = '/v1/dashboard/read-index';
/** How often a follower looks at its applied index while it catches up to a read index. */
const APPLIED_CHECK_MS = 10;

async function leaderReadIndex(meta: MetaStore, signal: AbortSignal): Promise<number> {
  const url = meta.leaderAddress();
  if (meta.leader === null || url === undefined)
    throw new ProblemError('NOT_LEADER', 'this instance knows no leader of the meta group; retry');
  const res = await fetch(`${url}${READ_INDEX_PATH}`, { signal });
  const body = (await res.json().catch(() => ({}))) as { index?: unknown; detail?: string };
  if (!res.ok || typeof body.index !== 'number')
    throw new ProblemError('NOT_LEADER', `the leader ${meta.leader} gave no read index (${res.status} ${body.detail ?? ''}); retry`);
  return body.index;
}

async function appliedUpTo(meta: MetaStore, index: number, signal: AbortSignal): Promise<void> {
  while (meta.state.appliedIndex < index) {
    if (signal.aborted) throw new ProblemError('NOT_LEADER', `this instance has not applied the leader's index ${index} yet; retry`);
    await new Promise((resolve) => setTimeout(resolve, APPLIED_CHECK_MS));
  }
}

/** The state once it reflects every write committed before this call, on the leader or a follower. */
export async function readAnywhere(meta: MetaStore): Promise<MetaStateMachine> {
  if (meta.isLeader) return meta.read();
  const signal = AbortSignal.timeout(dashboardReadTimeoutMs);
  await appliedUpTo(meta, await leaderReadIndex(meta, signal), signal);
  return meta.state;
}

/** `meta` with `read()` served on any instance (for code that takes a MetaStore, such as the access checks). */
export function readableAnywhere(meta: MetaStore): MetaStore {
  return {
    write: (entry) => meta.write(entry),
    read: () => readAnywhere(meta),
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
