/** Command-line configuration of the cell router (and, with a different name, the session proxy). */
import { Command, InvalidArgumentError } from 'commander';
import { HEARTBEAT_INTERVAL_MS_DEFAULT, HEARTBEAT_INTERVAL_MS_MIN, CELL_CALLS_IN_FLIGHT_MAX } from './limits.js';
import { parseControlPlaneUrls } from './routing-source.js';

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
}

const ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;

export const address =
  (what: string) =>
  (v: string): string => {
    if (!ADDRESS.test(v)) throw new InvalidArgumentError(`${what} must be host:port, e.g. 127.0.0.1:6001`);
    return v;
  };

export const positiveInt =
  (what: string, min = 1) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`${what} must be an integer >= ${min}`);
    return n;
  };

/** Checks `--control-plane URL[,URL...]` at parse time; the value is the list with its entries trimmed. */
const controlPlaneList = (v: string): string => {
  try {
    return parseControlPlaneUrls(v).join(',');
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
};

/** Options shared by the router and the proxy: where the routing table comes from. */
export function routingOptions(cmd: Command): Command {
  return cmd
    .option('--routing <file>', 'routing file (JSON: version, cells with replicas, routes); reloaded when it changes')
    .option(
      '--control-plane <urls>',
      'control-plane base URL, or the instances of its meta group separated by commas: the routing table is followed by long poll (GET /v1/routing) on one, and on the next when it stops answering',
      controlPlaneList,
    )
    .option(
      '--heartbeat-interval-ms <ms>',
      `one HeartbeatBatch per cell leader per interval (capped at a quarter of the shortest TTL)`,
      positiveInt('--heartbeat-interval-ms', HEARTBEAT_INTERVAL_MS_MIN),
      HEARTBEAT_INTERVAL_MS_DEFAULT,
    );
}

export function checkRoutingChoice(o: { routing?: string; controlPlane?: string }): void {
  if ((o.routing === undefined) === (o.controlPlane === undefined))
    throw new InvalidArgumentError('give exactly one of --routing FILE or --control-plane URL[,URL...]');
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
        CELL_CALLS_IN_FLIGHT_MAX,
      ),
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
  };
}
