/**
 * The session proxy: terminates clients' KeepAlive streams (many sessions
 * per stream) and sends their heartbeats to the cell leaders as one
 * HeartbeatBatch per cell leader per interval (the cell router's
 * HeartbeatBatcher). It answers a heartbeat only after the leader
 * acknowledged the batch that carried it. It holds no truth: a client whose
 * proxy dies reconnects to another and heartbeats there at once.
 *
 * Every other method of the contract answers INVALID_ARGUMENT with a
 * message pointing at the routers: a proxy only carries heartbeats.
 */
import { FencerError } from '@fencer/base';
import type { ServiceError } from '@grpc/grpc-js';
import { lockservice, toServiceError } from '@fencer/protocol';
import {
  CellPool,
  HeartbeatBatcher,
  KeepAliveStreams,
  RouterMetrics,
  limits,
  startLockServer,
  type LockServer,
  type RoutingSource,
  type RoutingTable,
} from '@fencer/cell-router';
import type { Logger } from 'pino';

export interface ProxyDeps {
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics?: RouterMetrics;
  readonly id?: string;
  readonly heartbeatIntervalMs?: number;
  readonly streamsMax?: number;
  readonly streamPendingMax?: number;
}

export interface Proxy {
  readonly metrics: RouterMetrics;
  readonly batcher: HeartbeatBatcher;
  readonly handlers: lockservice.LockServiceServer;
  listen(address: string): Promise<string>;
  close(): Promise<void>;
}

/** Every method but KeepAlive: INVALID_ARGUMENT naming where the call belongs (a proxy carries heartbeats only). */
const notHere =
  (method: string) =>
  (call: unknown, callback?: (e: Partial<ServiceError>) => void): void => {
    const err = toServiceError(
      new FencerError('INVALID_ARGUMENT', `a session proxy carries KeepAlive only; send ${method} to a cell router (FENCER_ENDPOINTS)`),
    );
    if (callback) callback(err);
    else (call as { emit(e: string, x: unknown): void }).emit('error', err);
  };

export function buildProxy(deps: ProxyDeps): Proxy {
  const metrics = deps.metrics ?? new RouterMetrics();
  const pool = new CellPool();
  const follow = (t: RoutingTable): void => {
    pool.update(t);
    metrics.routingVersion.set(t.version);
  };
  deps.source.onChange(follow);
  const batcher = new HeartbeatBatcher({
    pool,
    source: deps.source,
    logger: deps.logger,
    metrics,
    proxyId: deps.id ?? `proxy-${process.pid}`,
    intervalMs: deps.heartbeatIntervalMs ?? limits.HEARTBEAT_INTERVAL_MS_DEFAULT,
  });
  const streams = new KeepAliveStreams(batcher, metrics, deps.streamsMax, deps.streamPendingMax);
  const handlers: lockservice.LockServiceServer = {
    keepAlive: streams.serve,
    openSession: notHere('OpenSession'),
    acquire: notHere('Acquire'),
    release: notHere('Release'),
    checkToken: notHere('CheckToken'),
    getLock: notHere('GetLock'),
    listLocks: notHere('ListLocks'),
    closeSession: notHere('CloseSession'),
    watch: notHere('Watch'),
  };
  let server: LockServer | undefined;
  return {
    metrics,
    batcher,
    handlers,
    async listen(address: string): Promise<string> {
      await deps.source.start();
      follow(deps.source.table());
      batcher.start();
      server = await startLockServer(handlers, address);
      return server.address;
    },
    async close(): Promise<void> {
      batcher.close();
      deps.source.close();
      await server?.close();
      pool.close();
    },
  };
}
