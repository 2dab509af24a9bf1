/** Prometheus metrics of a router or proxy, per cell and per method, on one registry. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '@fencer/service';

export class RouterMetrics {
  readonly registry: Registry;
  readonly calls: Counter<'cell' | 'method' | 'code'>;
  readonly callSeconds: Histogram<'cell' | 'method'>;
  readonly retries: Counter<'cell' | 'method' | 'reason'>;
  readonly upstreamCalls: Counter<'transport'>;
  readonly inFlight: Gauge<'cell'>;
  /** The cells whose calls in flight fencer_router_in_flight shows (the router's pool). */
  inFlightSource: (() => Iterable<{ id: string; inFlight: number }>) | undefined;
  readonly watches: Gauge;
  readonly watchUpstreams: Gauge;
  readonly watchGroups: Gauge;
  readonly slowWatchers: Counter;
  readonly routingVersion: Gauge;
  readonly tenantsCreated: Counter;
  readonly heartbeats: Counter<'cell' | 'outcome'>;
  readonly batches: Counter<'cell' | 'outcome'>;
  readonly batchSessions: Histogram<'cell'>;
  readonly heartbeatAckSeconds: Histogram;
  readonly streams: Gauge;
  readonly pendingHeartbeats: Gauge;

  constructor(registry = new Registry(), defaults = false) {
    this.registry = registry;
    if (defaults) collectProcessMetrics(registry);
    const r = [registry];
    this.calls = new Counter({
      name: 'fencer_router_calls_total',
      help: 'Calls answered, by cell, method and gRPC status',
      labelNames: ['cell', 'method', 'code'],
      registers: r,
    });
    this.callSeconds = new Histogram({
      name: 'fencer_router_call_seconds',
      help: 'Time from a call arriving to its answer, retries included',
      labelNames: ['cell', 'method'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    });
    this.retries = new Counter({
      name: 'fencer_router_retries_total',
      help: 'Attempts retried, by reason',
      labelNames: ['cell', 'method', 'reason'],
      registers: r,
    });
    this.upstreamCalls = new Counter({
      name: 'fencer_router_upstream_calls_total',
      help: 'Unary attempts sent to a replica, by transport: lane (TCP frames) or grpc (a node without the lane)',
      labelNames: ['transport'],
      registers: r,
    });
    const inFlightOf = (): Iterable<{ id: string; inFlight: number }> => this.inFlightSource?.() ?? [];
    this.inFlight = new Gauge({
      name: 'fencer_router_in_flight',
      help: 'Calls and watches open towards a cell',
      labelNames: ['cell'],
      registers: r,
      // Read from the cells at scrape time: nothing to update per call.
      collect() {
        for (const c of inFlightOf()) this.set({ cell: c.id }, c.inFlight);
      },
    });
    const w = watchMetrics(r);
    [this.watches, this.watchUpstreams, this.watchGroups, this.slowWatchers] = [w.watches, w.watchUpstreams, w.watchGroups, w.slowWatchers];
    this.routingVersion = new Gauge({ name: 'fencer_routing_version', help: 'Version of the routing table in force', registers: r });
    this.tenantsCreated = new Counter({
      name: 'fencer_router_tenants_created_total',
      help: 'Namespaces created by auto-tenants',
      registers: r,
    });
    this.heartbeats = new Counter({
      name: 'fencer_proxy_heartbeats_total',
      help: 'Client heartbeats answered, by cell and outcome (alive, expired, unroutable)',
      labelNames: ['cell', 'outcome'],
      registers: r,
    });
    this.batches = new Counter({
      name: 'fencer_proxy_batches_total',
      help: 'HeartbeatBatch calls sent to cell leaders, by outcome',
      labelNames: ['cell', 'outcome'],
      registers: r,
    });
    this.batchSessions = new Histogram({
      name: 'fencer_proxy_batch_sessions',
      help: 'Sessions carried by one HeartbeatBatch',
      labelNames: ['cell'],
      buckets: [1, 10, 100, 1000, 5000, 10000, 50000],
      registers: r,
    });
    this.heartbeatAckSeconds = new Histogram({
      name: 'fencer_proxy_heartbeat_ack_seconds',
      help: 'Time from a client heartbeat arriving to its answer (after the leader acknowledged the batch)',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: r,
    });
    this.streams = new Gauge({ name: 'fencer_proxy_keepalive_streams', help: 'KeepAlive streams open', registers: r });
    this.pendingHeartbeats = new Gauge({
      name: 'fencer_proxy_pending_sessions',
      help: 'Sessions whose heartbeat waits for a batch or its answer',
      registers: r,
    });
  }
}

/** The router's watch gauges and counter (watch-proxy.ts, watch-group.ts). */
function watchMetrics(r: Registry[]): { watches: Gauge; watchUpstreams: Gauge; watchGroups: Gauge; slowWatchers: Counter } {
  const watches = new Gauge({ name: 'fencer_router_watches', help: 'Watch streams proxied now', registers: r });
  const watchUpstreams = new Gauge({
    name: 'fencer_router_watch_upstreams',
    help: 'Watch streams open towards the cells (one per group of coalesced watches, one per watch not in a group)',
    registers: r,
  });
  const watchGroups = new Gauge({
    name: 'fencer_router_watch_groups',
    help: 'Groups of identical watches sharing one upstream',
    registers: r,
  });
  const slowWatchers = new Counter({
    name: 'fencer_router_slow_watchers_total',
    help: 'Watches of a group cut with SLOW_WATCHER because their client did not read',
    registers: r,
  });
  return { watches, watchUpstreams, watchGroups, slowWatchers };
}
