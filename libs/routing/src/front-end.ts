/**
 * What a cell router and a session proxy both are: a lock-service server in
 * front of the cells of a routing table. It follows the table (the cell
 * pool learns each cell's replicas), carries clients' KeepAlive streams to
 * the cell leaders as batched heartbeats, and starts and stops in one
 * order: the routing source first (a first table is in before any call),
 * then the heartbeat timer, then the server; on close the batcher answers
 * what it holds before the source, the server and the channels go.
 *
 * A front end holds no truth (docs/decisions/0010-stateless-front-ends.md):
 * the routing table is the control plane's or the file's, and a heartbeat is
 * answered only from the cell leader's answer, so losing a front end only
 * sends its clients to another.
 */
import type { RoutingTable } from '@fencer/contract';
import type { lockservice } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { TlsFiles } from '@fencer/service';
import { CellPool } from './cell-pool.js';
import { HeartbeatBatcher } from './heartbeat-batcher.js';
import { KeepAliveStreams } from './keepalive-stream.js';
import { HEARTBEAT_INTERVAL_MS_DEFAULT } from './limits.js';
import { KEEPALIVE_PATH } from './keepalive-h2.js';
import { startLockServer, type LockServer, type RawStreamHandler } from './lock-server.js';
import type { RouterMetrics } from './metrics.js';
import type { RoutingSource } from './routing-source.js';

export interface FrontEndDeps {
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  /** Names this process in the HeartbeatBatches it sends (for the cells' operators). */
  readonly id: string;
  readonly heartbeatIntervalMs?: number | undefined;
  readonly streamsMax?: number | undefined;
  readonly streamPendingMax?: number | undefined;
  /** Mutual TLS to the cells, and TLS to clients (decision 0016). */
  readonly tls?: TlsFiles | undefined;
  /** KeepAlive streams through grpc-js's call objects instead of node:http2 directly (keepalive-h2.ts); for comparisons. */
  readonly keepAliveOnGrpcJs?: boolean | undefined;
}

export interface FrontEnd {
  readonly source: RoutingSource;
  readonly metrics: RouterMetrics;
  readonly pool: CellPool;
  readonly batcher: HeartbeatBatcher;
  readonly keepAlives: KeepAliveStreams;
  /** Starts the routing source and the heartbeat timer, then serves `handlers` on host:port (port 0 picks one); resolves with the address. */
  listen(handlers: lockservice.LockServiceServer, address: string): Promise<string>;
  close(): Promise<void>;
}

export function buildFrontEnd(deps: FrontEndDeps): FrontEnd {
  const { source, metrics } = deps;
  const pool = new CellPool(deps.tls);
  const follow = (t: RoutingTable): void => {
    pool.update(t);
    metrics.routingVersion.set(t.version);
  };
  source.onChange(follow);
  const batcher = new HeartbeatBatcher({
    pool,
    source,
    logger: deps.logger,
    metrics,
    proxyId: deps.id,
    intervalMs: deps.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS_DEFAULT,
  });
  const keepAlives = new KeepAliveStreams(batcher, metrics, deps.streamsMax, deps.streamPendingMax);
  let server: LockServer | undefined;
  return {
    source,
    metrics,
    pool,
    batcher,
    keepAlives,
    async listen(handlers, address) {
      await source.start();
      // A source may adopt its first table in start() without telling listeners (a file read at start): follow it here.
      follow(source.table());
      batcher.start();
      const raw = new Map<string, RawStreamHandler>(deps.keepAliveOnGrpcJs ? [] : [[KEEPALIVE_PATH, keepAlives.serveRaw]]);
      server = await startLockServer(handlers, address, deps.tls, raw);
      return server.address;
    },
    async close() {
      deps.tls?.stop();
      batcher.close();
      keepAlives.close();
      source.close();
      await server?.close();
      pool.close();
    },
  };
}
