#!/usr/bin/env node
/** The session-proxy process: flags, routing source, gRPC KeepAlive server, /metrics, SIGTERM. */
import { Command } from 'commander';
import {
  address,
  checkRoutingChoice,
  createLogger,
  exitOnBug,
  exitOnConfigError,
  limits,
  positiveInt,
  RouterMetrics,
  routingOptions,
  routingSourceFor,
  serveMetrics,
  stopOnSignals,
} from '@fencer/cell-router';
import { buildProxy } from './proxy.js';

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
let o: Record<string, string | number | undefined>;
try {
  cmd.parse(process.argv.slice(2), { from: 'user' });
  o = cmd.opts();
  checkRoutingChoice(o as { routing?: string; controlPlane?: string });
} catch (e) {
  exitOnConfigError('fencer-session-proxy', e);
}
const logger = createLogger('session-proxy');
exitOnBug(logger);
const metrics = new RouterMetrics(undefined, true);
const proxy = buildProxy({
  source: routingSourceFor(o as { routing?: string; controlPlane?: string }, logger, metrics.registry),
  logger,
  metrics,
  id: o.id as string,
  heartbeatIntervalMs: o.heartbeatIntervalMs as number,
  streamsMax: o.streamsMax as number,
});
const metricsServer = o.metricsListen ? await serveMetrics(o.metricsListen as string, metrics.registry) : undefined;
const at = await proxy.listen(o.listen as string);
logger.info({ listen: at, metrics: o.metricsListen, intervalMs: o.heartbeatIntervalMs }, 'session proxy serving');
stopOnSignals(logger, async () => {
  metricsServer?.close();
  await proxy.close();
});
