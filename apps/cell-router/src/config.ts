/** Command-line configuration of the cell router: the routing flags it shares with the session proxy, and its own. */
import { Command } from 'commander';
import { checkRoutingChoice, checkTlsChoice, limits, routingOptions } from '@fencer/routing';
import type { TlsPaths } from '@fencer/service';
import { address, positiveInt } from '@fencer/service';

export interface RouterConfig {
  readonly id: string;
  readonly listen: string;
  readonly metricsListen: string | undefined;
  readonly routing: string | undefined;
  /** One control-plane base URL, or several separated by commas (checked by parseControlPlaneUrls). */
  readonly controlPlane: string | undefined;
  readonly autoTenants: boolean;
  readonly heartbeatIntervalMs: number;
  readonly cellCallsInFlightMax: number;
  /** Identical watches share one upstream stream (off with --no-coalesce-watches, for A/B benchmarks). */
  readonly coalesceWatches: boolean;
  /** Mutual TLS to the cells, TLS to clients (--tls-cert, --tls-key, --tls-ca). */
  readonly tls: TlsPaths | undefined;
}

export function parseRouterConfig(argv: readonly string[]): RouterConfig {
  const cmd = routingOptions(
    new Command('fencer-cell-router')
      .description('Route the lock service to many cells by namespace.')
      .option('--id <id>', 'this router, in logs and heartbeat batches', `router-${process.pid}`)
      .option('--listen <host:port>', 'gRPC address of the lock service', address('--listen'), '127.0.0.1:6001')
      .option('--metrics-listen <host:port>', 'Prometheus /metrics address', address('--metrics-listen'))
      .option(
        '--auto-tenants',
        'create the tenant of an unknown namespace on first use (local fleets); off: NOT_FOUND NAMESPACE_NOT_FOUND',
        false,
      )
      .option(
        '--cell-calls-in-flight-max <n>',
        'calls per cell in flight; beyond: RESOURCE_EXHAUSTED TOO_MANY_REQUESTS',
        positiveInt('--cell-calls-in-flight-max'),
        limits.CELL_CALLS_IN_FLIGHT_MAX,
      )
      .option('--no-coalesce-watches', 'give every watch its own upstream stream (identical watches share one by default)'),
  )
    .exitOverride()
    .allowExcessArguments(false);
  cmd.parse([...argv], { from: 'user' });
  const o = cmd.opts();
  checkRoutingChoice(o);
  return {
    id: o.id,
    listen: o.listen,
    metricsListen: o.metricsListen,
    routing: o.routing,
    controlPlane: o.controlPlane,
    autoTenants: o.autoTenants,
    heartbeatIntervalMs: o.heartbeatIntervalMs,
    cellCallsInFlightMax: o.cellCallsInFlightMax,
    coalesceWatches: o.coalesceWatches,
    tls: checkTlsChoice(o),
  };
}
