export { type RunReport, type RunStats, Simulation, runSimulation } from './simulation.js';
export {
  type FaultMix,
  type SimMachineKind,
  type SimOptions,
  BUGS,
  allFaults,
  bugOptions,
  defaultOptions,
  sweepOptions,
  sweepReplicas,
} from './options.js';
export {
  type AckedWrite,
  type CheckerName,
  type ReadBarrier,
  type Violation,
  Checkers,
  DISRUPTION_CHECKERS,
  SAFETY_CHECKERS,
} from './checkers.js';
export { Scheduler } from './scheduler.js';
export { Network, type NetworkProfile, faultyNetwork, quietNetwork } from './network.js';
export { type Partition, type PartitionShape, PARTITION_SHAPES, cutBetween, makePartition } from './partitions.js';
export { KV_KEYS, KvStateMachine, decodePut, encodePut } from './kv.js';
export { PLANTED_BUGS, type PlantedBug, plantedHooks } from './planted.js';
export { type AckedGrant, type LockReadAnswer, type LockReadBarrier, LockCheckers, lockFingerprint } from './lock-checkers.js';
export {
  LOCK_NAMESPACES,
  type LockClient,
  type LockOp,
  type LockWrite,
  lockAnswered,
  lockName,
  newLockClient,
  nextLockOp,
} from './lock-workload.js';
export { US_PER_MS, US_PER_SECOND } from './time.js';
export { Hasher, digest } from './hash.js';
export { ModelDisk, ModelLogStore } from './model-store.js';
export { replayCommand } from './replay.js';
export {
  META_ACKED_MIN,
  META_BUGS,
  META_CHECKERS,
  META_HEAL_MS,
  META_RUN_MS_DEFAULT,
  type MetaBug,
  type MetaCheckerName,
  type MetaRunReport,
  type MetaSimOptions,
  type MetaViolation,
  metaReplayCommand,
  runMetaSimulation,
} from './meta-sim.js';
export {
  MOVE_BUGS,
  MOVES_GRANTS_MIN,
  MOVES_HEAL_MS,
  MOVES_RUN_MS_DEFAULT,
  type MoveBug,
  type MovesRunReport,
  type MovesSimOptions,
  movesReplayCommand,
  runMovesSimulation,
} from './moves-sim.js';
export { MOVE_CHECKERS, type MoveCheckerName, type MoveViolation } from './moves-checkers.js';
