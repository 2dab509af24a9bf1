/**
 * What the router's and the proxy's command lines share: where the routing
 * table comes from (`--routing FILE` or `--control-plane URL[,URL...]`,
 * exactly one) and the heartbeat interval, and the routing source those
 * flags name.
 */
import { Command, InvalidArgumentError } from 'commander';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { TlsFiles, type TlsPaths, positiveInt, tlsPathsOf } from '@fencer/service';
import { ControlPlaneRoutingSource } from './control-plane-routing-source.js';
import { parseControlPlaneUrls } from './control-plane-instances.js';
import { FileRoutingSource } from './file-routing-source.js';
import { HEARTBEAT_INTERVAL_MS_DEFAULT, HEARTBEAT_INTERVAL_MS_MIN } from './limits.js';
import type { RoutingSource } from './routing-source.js';

/** The routing flags as commander gives them. */
export interface RoutingChoice {
  readonly routing?: string | undefined;
  /** One control-plane base URL, or several separated by commas (checked by parseControlPlaneUrls). */
  readonly controlPlane?: string | undefined;
}

/** Checks `--control-plane URL[,URL...]` at parse time; the value is the list with its entries trimmed. */
const controlPlaneList = (v: string): string => {
  try {
    return parseControlPlaneUrls(v).join(',');
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
};

/** Options shared by the router and the proxy: where the routing table comes from, and the heartbeat interval. */
export function routingOptions(cmd: Command): Command {
  return cmd
    .option('--routing <file>', 'routing file (JSON: version, cells with replicas, routes); reloaded when it changes')
    .option(
      '--control-plane <urls>',
      'control-plane base URL, or the instances of its meta group separated by commas: the routing table is followed by long poll (GET /v1/routing) on one, and on the next when it stops answering',
      controlPlaneList,
    )
    .option(
      '--auth',
      'a fleet with tenant tokens (the cells check them): calls without authorization: Bearer are refused, a namespace with no tenant is forbidden, no auto-tenants',
      process.env.FENCER_AUTH === '1',
    )
    .option('--tls-cert <file>', "this process's certificate (PEM): mutual TLS to the cells, TLS to clients", process.env.FENCER_TLS_CERT)
    .option('--tls-key <file>', 'the key of --tls-cert (PEM)', process.env.FENCER_TLS_KEY)
    .option('--tls-ca <file>', 'the CA that signs the cells (PEM)', process.env.FENCER_TLS_CA)
    .option(
      '--heartbeat-interval-ms <ms>',
      `one HeartbeatBatch per cell leader per interval (capped at a quarter of the shortest TTL)`,
      positiveInt('--heartbeat-interval-ms', HEARTBEAT_INTERVAL_MS_MIN),
      HEARTBEAT_INTERVAL_MS_DEFAULT,
    );
}

/** Exactly one of --routing and --control-plane. */
export function checkRoutingChoice(o: RoutingChoice): void {
  if ((o.routing === undefined) === (o.controlPlane === undefined))
    throw new InvalidArgumentError('give exactly one of --routing FILE or --control-plane URL[,URL...]');
}

/** The source the flags name; a control plane is sent FENCER_CONTROL_PLANE_TOKEN as a bearer token. */
export function routingSourceFor(o: RoutingChoice, logger: Logger, registry?: Registry): RoutingSource {
  if (o.routing !== undefined) return new FileRoutingSource(o.routing, logger);
  return new ControlPlaneRoutingSource({
    baseUrl: o.controlPlane!,
    logger,
    token: process.env.FENCER_CONTROL_PLANE_TOKEN,
    ...(registry ? { registry } : {}),
  });
}

/** The TLS flags as commander gives them. */
export interface TlsChoice {
  readonly tlsCert?: string | undefined;
  readonly tlsKey?: string | undefined;
  readonly tlsCa?: string | undefined;
}

/** All three TLS flags or none (a usage error otherwise). */
export function checkTlsChoice(o: TlsChoice): TlsPaths | undefined {
  try {
    return tlsPathsOf(o);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

/** The front end's TLS files, watched for change and SIGHUP, when the flags name them. */
export function tlsFilesFor(paths: TlsPaths | undefined, logger: Logger): TlsFiles | undefined {
  if (paths === undefined) return undefined;
  const files = new TlsFiles(paths, (err) => logger.error({ err: err.message }, 'TLS files not reloaded; keeping the previous ones'));
  files.onReload(() => logger.info({ cert: paths.cert }, 'TLS files reloaded'));
  return files.start();
}
