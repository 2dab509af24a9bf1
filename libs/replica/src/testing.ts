/**
 * Test-only replicas: bugs that live in the replica's ready ordering, put
 * back in by a subclass so that production code carries no switch for them
 * on its safety path. The simulator and tests build replicas through
 * `createReplica`, which picks the subclass when a bug asks for it.
 */
import type { Ready } from '@fencer/raft';
import type { RaftLogStore } from '@fencer/wal';
import type { ReplicaEnv } from './env.js';
import { Replica, type ReplicaConfig } from './replica.js';
import type { StateMachine } from './state-machine.js';

/**
 * The bug 'ackBeforeFsync': a ready counts as persisted the moment its
 * write is issued, so its messages (votes, acknowledgements) leave and its
 * entries count toward commitment before the disk said yes. A crash then
 * loses what was acknowledged.
 */
export class AckBeforeFsyncReplica extends Replica {
  constructor(config: ReplicaConfig, store: RaftLogStore, stateMachine: StateMachine, env: ReplicaEnv) {
    const { ackBeforeFsync: _planted, ...coreBugs } = config.bugs ?? {};
    super({ ...config, bugs: coreBugs }, store, stateMachine, env);
  }

  protected override persistReady(rd: Ready, persisted: () => void): void {
    // The write still happens, and a failure still stops the replica; nobody waits for it.
    super.persistReady(rd, () => {});
    persisted();
  }
}

/**
 * A replica with the bugs `config.bugs` asks for: the core's through
 * RaftConfig.bugs, the replica's by subclass. Constructed, not opened: its
 * owner calls `open()` once it is ready for the state machine's callbacks.
 */
export function createReplica(config: ReplicaConfig, store: RaftLogStore, stateMachine: StateMachine, env: ReplicaEnv): Replica {
  return config.bugs?.ackBeforeFsync === true
    ? new AckBeforeFsyncReplica(config, store, stateMachine, env)
    : new Replica(config, store, stateMachine, env);
}
