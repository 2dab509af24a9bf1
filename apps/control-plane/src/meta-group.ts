/**
 * The HTTP app's seam onto the meta group. The group itself (the meta state
 * machine on @fencer/group's GroupCore) lives in @fencer/meta-fsm/group, so the
 * simulator runs the very class this process runs; a test may pass a fake.
 */
import type { NodeId } from '@fencer/base';
import type { Cancel } from '@fencer/group';
import type { MetaApplied, MetaEntry, MetaStateMachine } from '@fencer/meta-fsm';

export { MetaGroup, isNotLeader, type MetaGroupConfig, type MetaGroupEnv } from '@fencer/meta-fsm/group';

export interface MetaStore {
  /** Proposes on the leader; resolves with the outcome once applied here. Rejects with FencerError NOT_LEADER elsewhere. */
  write(entry: MetaEntry): Promise<MetaApplied>;
  /** The state once a linearizable read may be served from it. */
  read(): Promise<MetaStateMachine>;
  /** The state as applied here, without a barrier (for long polls that already passed one). */
  readonly state: MetaStateMachine;
  readonly isLeader: boolean;
  /** The leader's id, when known. */
  readonly leader: NodeId | null;
  /** The leader's HTTP URL from the member directory, when known (followers forward there). */
  leaderAddress(): string | undefined;
  /** `done` once the routing version passes `sinceVersion` or after `waitMs`; throws TOO_MANY_REQUESTS past the bound. */
  waitRouting(sinceVersion: number, waitMs: number, done: () => void): Cancel;
  /** The index of the last entry applied here. */
  readonly appliedIndex: number;
  /** `done(true)` once `index` is applied here, `done(false)` after `waitMs`; throws TOO_MANY_REQUESTS past the bound. */
  waitApplied(index: number, waitMs: number, done: (reached: boolean) => void): Cancel;
}
