/** The control plane as a library: the app, its seams, and the meta-group glue (main.ts wires them to sockets). */
export { buildApp, type AppMetrics, type ControlPlaneDeps } from './app.js';
export { moveJson, snapshotJson, tenantJson } from './resource-json.js';
export {
  GrpcCellDirectory,
  type CellDirectory,
  type CellPlan,
  type CellReplicaPlan,
  type CellView,
  type DropResult,
  type MoveCells,
  type NamespaceExport,
  type NamespaceView,
  type ReplicaView,
  CellRefusal,
} from './cells.js';
export { grpcWatchClient, type WatchClient, type WatchClientFactory } from './dashboard/tenant-locks.js';
export { LeaderLoop, type LeaderTask, type LeaderLoopMetrics } from './workers/leader-loop.js';
export { MOVES_TASK, moveWorker, type MoveWorkerDeps, type MoveWorkerMetrics } from './workers/move-worker.js';
export { OWNERSHIP_TASK, ownershipReconciler, type OwnershipDeps } from './workers/ownership.js';
export { MetaGroup, isNotLeader, type MetaGroupConfig, type MetaGroupEnv, type MetaStore } from './meta-group.js';
export { PROBLEMS, ProblemError, problemOf, type Problem, type ProblemCode } from './problems.js';
export { CONTRACT_SCHEMA_ID, absoluteRefs, contractAjv, contractSchema, openapi, openapiPath } from './openapi.js';
export { hashToken, loadOrCreateAdminToken, newToken } from './auth.js';
export * as limits from './limits.js';
export { parseConfig as parseControlPlaneConfig, type ControlPlaneConfig } from './config.js';
export { ControlPlaneMetrics } from './metrics.js';
