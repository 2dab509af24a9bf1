/**
 * The session proxy: a front end (@fencer/routing) that serves KeepAlive
 * only. It terminates clients' KeepAlive streams (many sessions per stream)
 * and sends their heartbeats to the cell leaders as one HeartbeatBatch per
 * cell leader per interval, answering a heartbeat only after the leader
 * acknowledged the batch that carried it. It holds no truth: a client whose
 * proxy dies reconnects to another and heartbeats there at once.
 *
 * Every other method of the contract answers INVALID_ARGUMENT with a
 * message pointing at the routers: a proxy only carries heartbeats.
 */
import { FencerError } from '@fencer/base';
import type { ServiceError } from '@grpc/grpc-js';
import { type lockservice, toServiceError } from '@fencer/protocol';
import { buildFrontEnd, type HeartbeatBatcher, RouterMetrics, type RoutingSource } from '@fencer/routing';
import type { Logger } from '@fencer/service';
import type { TlsFiles } from '@fencer/service';

export interface ProxyDeps {
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics?: RouterMetrics;
  readonly id?: string;
  readonly heartbeatIntervalMs?: number;
  readonly streamsMax?: number;
  readonly streamPendingMax?: number;
  /** Mutual TLS to the cells and TLS to clients (@fencer/routing tlsFilesFor). */
  readonly tls?: TlsFiles | undefined;
  /** A fleet with tenant tokens (decision 0016): streams without one are refused, each session checked by its leader. */
  readonly auth?: boolean;
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
  const front = buildFrontEnd({
    source: deps.source,
    logger: deps.logger,
    metrics: deps.metrics ?? new RouterMetrics(),
    id: deps.id ?? `proxy-${process.pid}`,
    heartbeatIntervalMs: deps.heartbeatIntervalMs,
    streamsMax: deps.streamsMax,
    streamPendingMax: deps.streamPendingMax,
    tls: deps.tls,
    auth: deps.auth === true,
  });
  const handlers: lockservice.LockServiceServer = {
    keepAlive: front.keepAlives.serve,
    openSession: notHere('OpenSession'),
    acquire: notHere('Acquire'),
    release: notHere('Release'),
    checkToken: notHere('CheckToken'),
    getLock: notHere('GetLock'),
    listLocks: notHere('ListLocks'),
    closeSession: notHere('CloseSession'),
    watch: notHere('Watch'),
  };
  return {
    metrics: front.metrics,
    batcher: front.batcher,
    handlers,
    listen: (address) => front.listen(handlers, address),
    close: () => front.close(),
  };
}
