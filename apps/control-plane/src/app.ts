/**
 * The control plane's HTTP API (fastify), implementing
 * openapi/openapi.yaml. `buildApp(deps)` returns the app; main.ts only
 * listens, tests use inject().
 *
 * The app is the root instance's cross-cutting hooks (http/) and one plugin
 * per resource (routes/):
 * - requests are validated, and responses serialised, with the contract's
 *   own JSON schemas (http/contract-validation.ts);
 * - every error is an RFC 9457 problem document with a stable code
 *   (problems.ts, http/problem-replies.ts);
 * - state lives in the meta group (MetaStore): writes are proposed on its
 *   leader, and a follower forwards every request but health, the contract
 *   and the routing and fleet reads to the leader's URL
 *   (http/leader-forwarding.ts); reads wait for a ReadIndex round, on a
 *   follower one through its leader (http/follower-reads.ts);
 * - who may call what is each route's `config.access` (http/access.ts);
 * - the dashboard's page and event stream are served by every instance itself (routes/dashboard.ts);
 * - writes carry their Idempotency-Key into the log, so a retry gets the
 *   first answer even from a new leader (http/idempotency.ts).
 */
import { randomUUID } from 'node:crypto';
import type tls from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { TlsFiles } from '@fencer/service';
import { newToken } from './auth.js';
import type { CellDirectory } from './cells.js';
import { installAccessChecks } from './http/access.js';
import { installContractValidation } from './http/contract-validation.js';
import { followerReads, installReadIndexRoute } from './http/follower-reads.js';
import { metaWriter } from './http/idempotency.js';
import { installLeaderForwarding } from './http/leader-forwarding.js';
import { installProblemReplies } from './http/problem-replies.js';
import { installRequestMetrics, type AppMetrics } from './http/request-metrics.js';
import { bodyBytesMax } from './limits.js';
import type { MetaStore } from './meta-group.js';
import type { WatchClientFactory } from './dashboard/tenant-locks.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { fleetRoutes } from './routes/fleet.js';
import { healthRoutes } from './routes/health.js';
import { moveRoutes } from './routes/moves.js';
import type { RouteContext } from './routes/route-context.js';
import { routingRoutes } from './routes/routing.js';
import { snapshotRoutes } from './routes/snapshots.js';
import { tenantRoutes } from './routes/tenants.js';

export type { AppMetrics } from './http/request-metrics.js';

export interface ControlPlaneDeps {
  readonly meta: MetaStore;
  readonly cells: CellDirectory;
  /** Auth on: the admin token every admin call must bear. Absent: auth off (the local default). */
  readonly adminToken?: string;
  /** With auth on: the routers' and proxies' token (routing, fleet status, auto-tenants); absent: they need the admin token. */
  readonly frontEndToken?: string;
  readonly wallMs?: () => number;
  readonly newId?: () => string;
  readonly newTenantToken?: () => string;
  /** A pino logger for fastify, or false. */
  readonly logger?: FastifyServerOptions['loggerInstance'] | false;
  readonly metrics?: AppMetrics;
  /** Starts a leader task's next pass now (workers/leader-loop.ts LeaderLoop.wake), after a write that journaled work. */
  readonly wake?: (task: string) => void;
  /** A follower serves the routing and fleet reads after a barrier through the leader (default true); false forwards them. */
  readonly followerReads?: boolean;
  /** This instance's id in the meta group, shown on the dashboard. */
  readonly instanceId?: string;
  /** How the dashboard's lock watches reach a cell; default: the TypeScript client over gRPC. */
  readonly newWatchClient?: WatchClientFactory;
  /** Serve HTTPS with this instance's certificate, reloaded on change or SIGHUP (clients present none: they bear tokens). */
  readonly https?: TlsFiles;
}

function routeContextOf(deps: ControlPlaneDeps): RouteContext {
  return {
    meta: deps.meta,
    cells: deps.cells,
    adminToken: deps.adminToken,
    frontEndToken: deps.frontEndToken,
    write: metaWriter(deps.meta),
    wallMs: deps.wallMs ?? (() => Date.now()),
    newId: deps.newId ?? (() => randomUUID()),
    newTenantToken: deps.newTenantToken ?? (() => newToken('tenant')),
    wake: deps.wake ?? (() => undefined),
  };
}

export async function buildApp(deps: ControlPlaneDeps): Promise<FastifyInstance> {
  const ctx = routeContextOf(deps);
  const app = Fastify({
    ...(deps.https ? { https: { ...deps.https.current } } : {}),
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: bodyBytesMax,
    routerOptions: { maxParamLength: 256 },
  });
  // On the root instance, before any route plugin: every plugin inherits the validators, the error
  // handler and the hooks that exist when it is registered.
  // A new certificate reaches connections made after the reload.
  if (deps.https) {
    const stop = deps.https.follow(app.server as unknown as tls.Server);
    app.addHook('onClose', async () => stop());
  }
  installContractValidation(app);
  installProblemReplies(app);
  if (deps.metrics) installRequestMetrics(app, deps.metrics);
  // Both run at preValidation, in this order: a follower forwards the request as it came, and the leader
  // authorizes it against the newest state (a token rotated a moment ago). Once forwarded, the reply is
  // sent and fastify runs no further hook.
  installLeaderForwarding(app, ctx.meta, deps.followerReads === false ? undefined : followerReads(ctx.meta, ctx.adminToken));
  installAccessChecks(app, ctx);
  installReadIndexRoute(app, ctx.meta);

  await app.register(healthRoutes, ctx);
  await app.register(fleetRoutes, ctx);
  await app.register(routingRoutes, ctx);
  await app.register(tenantRoutes, ctx);
  await app.register(moveRoutes, ctx);
  await app.register(snapshotRoutes, ctx);
  await app.register(dashboardRoutes, {
    ...ctx,
    instanceId: deps.instanceId ?? 'control-plane',
    ...(deps.newWatchClient ? { newWatchClient: deps.newWatchClient } : {}),
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
  });
  return app;
}
