/**
 * @fencer/chaos: the process-level chaos harness (fault proxies, nemesis,
 * workloads in client processes, recorded history) and its checkers.
 */
export { LinkProxy, HEALED, type LinkFault, type ProxyStats } from './proxy.js';
export {
  bridge,
  connected,
  isolate,
  majorityMinority,
  oneWay,
  ring,
  type Link,
  type Partition,
  type PartitionShape,
} from './partitions.js';
export {
  loadHistory,
  monoNowMs,
  HistoryWriter,
  type History,
  type HistoryRecord,
  type Op,
  type OpArgs,
  type OpResult,
  type WatchSegment,
} from './history.js';
export { INITIAL_STATE, step, stateKey, type LockEvent, type LockModelState, type RequestExpectation } from './check/lock-model.js';
export { checkLock, describe, type LinearizabilityResult } from './check/linearizability.js';
export { buildLockHistories, sessionWindows, type LockHistories, type SessionWindow } from './check/lock-history.js';
export { checkTokens, type TokenReport } from './check/tokens.js';
export { checkResource, type ResourceReport } from './check/resource-check.js';
export { checkWatches, type CanonicalLog, type WatchReport } from './check/watch-check.js';
export { checkGrantsInLog, type LogGrantReport } from './check/log-check.js';
export { checkExpiryPromises, type ExpiryPromiseReport } from './check/expiry-promise.js';
export { readFinalLogs, readReplicaLog, replay, lockSummary, type FinalLogs, type ReplicaLog } from './final-log.js';
export { runChaos, summarize, rerunCommand, type ChaosOptions, type ChaosReport, type ChaosFigures, type NemesisMode } from './run.js';
export type { FaultKind, ScheduledFault } from './nemesis.js';
export type { ResourceState, ResourceDecision } from './resource.js';
export { runMovesChaos, summarizeMoves, type MovesChaosOptions, type MovesReport, type MovesFigures } from './moves-run.js';
export { MOVES_BUGS, type MovesBug } from './moves-fleet.js';
export { LEADER_RESET_WATCH_MS } from './leader-link.js';
