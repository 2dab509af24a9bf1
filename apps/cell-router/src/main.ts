#!/usr/bin/env node
/** The cell-router process: flags, routing source, the router's gRPC server, /metrics with /livez and /readyz, SIGTERM. */
import { buildRouter, RouterMetrics, routingReadiness, routingSourceFor, tlsFilesFor } from '@fencer/routing';
import { createLogger, exitOnBug, exitOnConfigError, serveMetrics, stopOnSignals } from '@fencer/service';
import { parseRouterConfig, type RouterConfig } from './config.js';

let config: RouterConfig;
try {
  config = parseRouterConfig(process.argv.slice(2));
} catch (e) {
  exitOnConfigError('fencer-cell-router', e);
}
const logger = createLogger('cell-router');
exitOnBug(logger, 'fencer-cell-router');
const metrics = new RouterMetrics(undefined, true);
const router = buildRouter({
  source: routingSourceFor(config, logger, metrics.registry),
  logger,
  metrics,
  autoTenants: config.autoTenants,
  heartbeatIntervalMs: config.heartbeatIntervalMs,
  cellCallsInFlightMax: config.cellCallsInFlightMax,
  coalesceWatches: config.coalesceWatches,
  id: config.id,
  tls: tlsFilesFor(config.tls, logger),
});
// Readiness: a routing table is held (routingReadiness); liveness: the listener answers.
const metricsServer = config.metricsListen
  ? await serveMetrics(config.metricsListen, metrics.registry, { ready: routingReadiness(router.source) })
  : undefined;
const at = await router.listen(config.listen);
logger.info(
  {
    listen: at,
    tls: config.tls !== undefined,
    metrics: config.metricsListen,
    routingVersion: router.source.table().version,
    autoTenants: config.autoTenants,
  },
  'cell router serving',
);
stopOnSignals(logger, async (signal) => {
  logger.info({ signal }, 'stopping');
  metricsServer?.close();
  await router.close();
});
