export {
  type Applied,
  type ProposeCallback,
  type RaftTuning,
  type ReadCallback,
  type ReplicaBug,
  type ReplicaConfig,
  Replica,
  proposeAsync,
  proposeConfChangeAsync,
  raftTuningDefault,
  readIndexAsync,
} from './replica.js';
export type { StateMachine } from './state-machine.js';
export { type Logger, type Metrics, type ReplicaEnv, type ReplicaObserver, type Transport, noopLogger, noopMetrics } from './env.js';
export * as limits from './limits.js';
