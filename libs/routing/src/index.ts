/**
 * @fencer/routing: serving the lock contract in front of many cells, routed
 * by namespace. The cell router (buildRouter) and the session proxy
 * (buildFrontEnd with KeepAlive only) are compositions of these parts:
 *
 * - routing sources: where the routing table comes from (a file, the
 *   control plane's long poll, a fixed table) and the flags that name one;
 * - the cell pool: each cell's replicas, its last known leader, channels;
 * - the heartbeat batcher and KeepAlive streams: clients' heartbeats as one
 *   HeartbeatBatch per cell leader per interval;
 * - the lock-service server, the router's request routing, its metrics and
 *   limits.
 */
export { buildRouter, type Router, type RouterDeps } from './router.js';
export { buildFrontEnd, type FrontEnd, type FrontEndDeps } from './front-end.js';
export { namespaceOfCall, type UnaryMethod } from './namespace-of-call.js';
export { CellPool, CellState, type LockStub, type InternalStub } from './cell-pool.js';
export { HeartbeatBatcher, type HeartbeatAnswer, type HeartbeatBatcherDeps, type HeartbeatDone } from './heartbeat-batcher.js';
export { KeepAliveStreams } from './keepalive-stream.js';
export { RouterMetrics } from './metrics.js';
export * as limits from './limits.js';
export { StaticRoutingSource, routingReadiness, type RoutingSource } from './routing-source.js';
export { FileRoutingSource } from './file-routing-source.js';
export { ControlPlaneRoutingSource, TENANT_RATES_POLL_MS, parseRates, type ControlPlaneOptions } from './control-plane-routing-source.js';
export { AcquireRateLimiter, BURST_MS, RATE_LIMITED_NAMESPACES_MAX } from './rate-limiter.js';
export { parseControlPlaneUrls } from './control-plane-instances.js';
export {
  checkRoutingChoice,
  checkTlsChoice,
  routingOptions,
  routingSourceFor,
  tlsFilesFor,
  type RoutingChoice,
  type TlsChoice,
} from './routing-options.js';
export { startLockServer, type LockServer } from './lock-server.js';
