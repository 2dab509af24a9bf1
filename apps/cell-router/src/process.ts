/**
 * What the router's and the proxy's main.ts share: the routing source their
 * flags name, a Prometheus endpoint, and a clean stop on SIGTERM/SIGINT.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import { ControlPlaneRoutingSource, FileRoutingSource, type RoutingSource } from './routing-source.js';

export function routingSourceFor(
  o: { routing?: string | undefined; controlPlane?: string | undefined },
  logger: Logger,
  registry?: Registry,
): RoutingSource {
  if (o.routing !== undefined) return new FileRoutingSource(o.routing, logger);
  return new ControlPlaneRoutingSource({
    baseUrl: o.controlPlane!,
    logger,
    token: process.env.FENCER_CONTROL_PLANE_TOKEN,
    ...(registry ? { registry } : {}),
  });
}

/** Serves GET /metrics from the registry; resolves once listening. */
export function serveMetrics(address: string, registry: Registry): Promise<HttpServer> {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('not found: try /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500).end(e.message),
    );
  });
  const at = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(address.slice(at + 1)), address.slice(0, at), () => resolve(server));
  });
}

/** Runs `stop` once on SIGTERM or SIGINT, then exits 0 (1 if stopping failed). */
export function stopOnSignals(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    stop().then(
      () => process.exit(0),
      (e: Error) => {
        logger.error({ err: e.stack }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}

/** An uncaught exception or rejection is a bug: log it and exit non-zero rather than serve on in an unknown state. */
export function exitOnBug(logger: Logger): void {
  const die =
    (what: string) =>
    (err: unknown): void => {
      logger.fatal({ err: err instanceof Error ? err.stack : String(err) }, `${what} (a bug): exiting`);
      process.exit(1);
    };
  process.on('uncaughtException', die('uncaught exception'));
  process.on('unhandledRejection', die('unhandled rejection'));
}

/** Prints a configuration error the way a person can act on, and exits 2. */
export function exitOnConfigError(name: string, e: unknown): never {
  const code = (e as { code?: string }).code;
  if (code === 'commander.helpDisplayed' || code === 'commander.version') process.exit(0);
  process.stderr.write(`${name}: ${(e as Error).message.replace(/^error: /, '')}\n`);
  process.exit(2);
}
