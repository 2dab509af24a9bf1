/**
 * The cell router: the whole client contract in front of many cells.
 *
 * Every call is routed by the namespace of its lock name, prefix or session
 * id (namespace-of-call.ts) through the routing table to its cell's last
 * known leader, and retried inside the caller's deadline while the cell
 * says the attempt did not run (unary-call.ts). Errors reach the client in
 * the contract's words, without the cell-internal leader-hint (the client's
 * endpoint is the router). Watch is proxied and resumed without a gap
 * (watch-proxy.ts); identical watches share one upstream stream
 * (watch-group.ts). KeepAlive goes through a HeartbeatBatcher, as on a
 * session proxy (front-end.ts).
 *
 * A namespace the table does not route is NOT_FOUND NAMESPACE_NOT_FOUND,
 * unless auto-tenants is on: then the first call naming it (OpenSession,
 * GetLock, ListLocks, Watch, CheckToken) creates its tenant through the
 * routing source (cell-of-namespace.ts).
 */
import type { lockservice } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { TlsFiles } from '@fencer/service';
import type { CellPool } from './cell-pool.js';
import { cellOfNamespace } from './cell-of-namespace.js';
import { buildFrontEnd } from './front-end.js';
import type { HeartbeatBatcher } from './heartbeat-batcher.js';
import { CELL_CALLS_IN_FLIGHT_MAX } from './limits.js';
import { RouterMetrics } from './metrics.js';
import type { RoutingSource } from './routing-source.js';
import { unaryHandler, type UnaryDeps } from './unary-call.js';
import { upstreamAttempt } from './upstream.js';
import { WatchProxies, type WatchOptions } from './watch-proxy.js';
import { AcquireRateLimiter } from './rate-limiter.js';

export interface RouterDeps {
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics?: RouterMetrics;
  /** Create the tenant of an unknown namespace on first use (the local fleet's default), instead of NOT_FOUND NAMESPACE_NOT_FOUND. */
  readonly autoTenants?: boolean;
  readonly cellCallsInFlightMax?: number;
  readonly heartbeatIntervalMs?: number;
  /** Names this router in the HeartbeatBatches it sends. */
  readonly id?: string;
  /** Mutual TLS to the cells and TLS to clients (tlsFilesFor). */
  readonly tls?: TlsFiles | undefined;
  /** Identical watches share one upstream stream (default true; watch-group.ts). */
  readonly coalesceWatches?: boolean;
  /** Watch coalescing's bounds, for tests (watch-proxy.ts). */
  readonly watchOptions?: Omit<WatchOptions, 'coalesce'>;
}

export interface Router {
  readonly metrics: RouterMetrics;
  readonly pool: CellPool;
  readonly source: RoutingSource;
  readonly batcher: HeartbeatBatcher;
  /** The grpc-js handlers of LockService (also usable on a server you own). */
  readonly handlers: lockservice.LockServiceServer;
  /** Starts the routing source and the heartbeat timer, then listens on host:port (port 0 picks one); resolves with the address. */
  listen(address: string): Promise<string>;
  close(): Promise<void>;
}

export function buildRouter(deps: RouterDeps): Router {
  const { source, logger } = deps;
  const metrics = deps.metrics ?? new RouterMetrics();
  const routerId = deps.id ?? `router-${process.pid}`;
  const front = buildFrontEnd({ source, logger, metrics, id: routerId, heartbeatIntervalMs: deps.heartbeatIntervalMs, tls: deps.tls });
  const { pool } = front;
  metrics.inFlightSource = () => pool.all();
  const inFlightMax = deps.cellCallsInFlightMax ?? CELL_CALLS_IN_FLIGHT_MAX;
  const cellOf = cellOfNamespace({ source, pool, metrics, autoTenants: deps.autoTenants ?? false });
  const acquireLimiter = new AcquireRateLimiter(() => source.acquireRates?.());
  const unary: UnaryDeps = {
    source,
    logger,
    metrics,
    cellOf,
    attempt: upstreamAttempt(pool, metrics, routerId),
    inFlightMax,
    acquireLimiter,
  };
  const watches = new WatchProxies(
    { source, pool, logger, metrics, cellOf, inFlightMax },
    { ...deps.watchOptions, coalesce: deps.coalesceWatches ?? true },
  );
  const handlers: lockservice.LockServiceServer = {
    openSession: unaryHandler(unary, 'openSession'),
    acquire: unaryHandler(unary, 'acquire'),
    release: unaryHandler(unary, 'release'),
    checkToken: unaryHandler(unary, 'checkToken'),
    getLock: unaryHandler(unary, 'getLock'),
    listLocks: unaryHandler(unary, 'listLocks'),
    closeSession: unaryHandler(unary, 'closeSession'),
    keepAlive: front.keepAlives.serve,
    watch: watches.serve,
  };
  return {
    metrics,
    pool,
    source,
    batcher: front.batcher,
    handlers,
    listen: (address) => front.listen(handlers, address),
    close: () => front.close(),
  };
}
