export { buildRouter, namespaceOfCall, type Router, type RouterDeps } from './router.js';
export { CellPool, CellState, type LockStub, type InternalStub } from './cell-pool.js';
export { HeartbeatBatcher, type HeartbeatAnswer, type HeartbeatBatcherDeps, type HeartbeatDone } from './heartbeat-batcher.js';
export { KeepAliveStreams } from './keepalive-stream.js';
export { RouterMetrics } from './metrics.js';
export { createLogger, type Logger } from './logger.js';
export * as limits from './limits.js';
export {
  EMPTY_TABLE,
  RoutingFormatError,
  leastLoadedCell,
  parseRoutingFile,
  parseRoutes,
  parseCells,
  routingFileJson,
  type CellAddresses,
  type Route,
  type RouteState,
  type RoutingTable,
} from './routing.js';
export {
  ControlPlaneRoutingSource,
  FileRoutingSource,
  StaticRoutingSource,
  type ControlPlaneOptions,
  type RoutingSource,
} from './routing-source.js';
export { address, positiveInt, routingOptions, checkRoutingChoice, parseRouterConfig, type RouterConfig } from './config.js';
export { routingSourceFor, serveMetrics, stopOnSignals, exitOnBug, exitOnConfigError } from './process.js';
export { startLockServer, type LockServer } from './lock-server.js';
