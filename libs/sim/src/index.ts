export { type RunReport, type RunStats, Simulation, runSimulation } from './simulation.js';
export { type FaultMix, type SimOptions, BUGS, allFaults, bugOptions, defaultOptions } from './options.js';
export { type AckedWrite, type CheckerName, type ReadBarrier, type Violation, Checkers, SAFETY_CHECKERS } from './checkers.js';
export { Scheduler } from './scheduler.js';
export { Network, type NetworkProfile, faultyNetwork, quietNetwork } from './network.js';
export { type Partition, type PartitionShape, PARTITION_SHAPES, cutBetween, makePartition } from './partitions.js';
export { KV_KEYS, KvStateMachine, decodePut, encodePut } from './kv.js';
export { Hasher, digest } from './hash.js';
export { ModelDisk, ModelLogStore } from './model-store.js';
