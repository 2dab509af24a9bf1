#!/usr/bin/env node
/** The session-proxy process: flags, routing source, the KeepAlive-only gRPC server, /metrics with /livez and /readyz, SIGTERM. */
import { Command } from 'commander';
import {
  checkRoutingChoice,
  checkTlsChoice,
  limits,
  RouterMetrics,
  routingOptions,
  routingReadiness,
  routingSourceFor,
  tlsFilesFor,
} from '@fencer/routing';
import { address, createLogger, exitOnBug, exitOnConfigError, positiveInt, serveMetrics, stopOnSignals } from '@fencer/service';
import { buildProxy } from './proxy.js';

interface ProxyOptions {
  readonly id: string;
  readonly listen: string;
  readonly metricsListen: string | undefined;
  readonly streamsMax: number;
  readonly heartbeatIntervalMs: number;
  readonly routing: string | undefined;
  readonly controlPlane: string | undefined;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tlsCa?: string;
  readonly auth?: boolean;
}

const cmd = routingOptions(
  new Command('fencer-session-proxy')
    .description('Carry clients\u2019 KeepAlive streams to the cell leaders as batched heartbeats.')
    .option('--id <id>', 'this proxy, in logs and heartbeat batches', `proxy-${process.pid}`)
    .option('--listen <host:port>', 'gRPC address clients send KeepAlive to', address('--listen'), '127.0.0.1:6101')
    .option('--metrics-listen <host:port>', 'Prometheus /metrics address', address('--metrics-listen'))
    .option('--streams-max <n>', 'KeepAlive streams at once', positiveInt('--streams-max'), limits.KEEPALIVE_STREAMS_MAX),
)
  .exitOverride()
  .allowExcessArguments(false);
let o: ProxyOptions;
let tlsPaths: ReturnType<typeof checkTlsChoice>;
try {
  cmd.parse(process.argv.slice(2), { from: 'user' });
  o = cmd.opts<ProxyOptions>();
  checkRoutingChoice(o);
  tlsPaths = checkTlsChoice(o);
} catch (e) {
  exitOnConfigError('fencer-session-proxy', e);
}
const logger = createLogger('session-proxy');
exitOnBug(logger, 'fencer-session-proxy');
const metrics = new RouterMetrics(undefined, true);
const source = routingSourceFor(o, logger, metrics.registry);
const proxy = buildProxy({
  source,
  logger,
  metrics,
  id: o.id,
  heartbeatIntervalMs: o.heartbeatIntervalMs,
  streamsMax: o.streamsMax,
  tls: tlsFilesFor(tlsPaths, logger),
  auth: o.auth === true,
});
// Readiness: a routing table is held (routingReadiness); liveness: the listener answers.
const metricsServer = o.metricsListen
  ? await serveMetrics(o.metricsListen, metrics.registry, { ready: routingReadiness(source) })
  : undefined;
const at = await proxy.listen(o.listen);
logger.info(
  { listen: at, metrics: o.metricsListen, intervalMs: o.heartbeatIntervalMs, tls: tlsPaths !== undefined },
  'session proxy serving',
);
stopOnSignals(logger, async (signal) => {
  logger.info({ signal }, 'stopping');
  metricsServer?.close();
  await proxy.close();
});
