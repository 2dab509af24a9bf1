export {
  type Applied,
  type ProposeCallback,
  type ReadCallback,
  type ReplicaBug,
  type ReplicaConfig,
  Replica,
  proposeAsync,
  proposeConfChangeAsync,
  readIndexAsync,
} from './replica.js';
/** The core's tuning and its one set of defaults, re-exported for callers that configure a replica. */
export { type DropReason, type RaftTuning, raftTuningDefault } from '@fencer/raft';
export type { StateMachine } from './state-machine.js';
export { type Logger, type Metrics, type ReplicaEnv, type ReplicaObserver, type Transport, noopLogger, noopMetrics } from './env.js';
export * as limits from './limits.js';
