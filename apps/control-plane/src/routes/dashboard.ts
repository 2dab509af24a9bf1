/**
 * The fleet dashboard (docs/decisions/0023-the-dashboard.md): the page at
 * `/`, its files under /ui/, and its Server-Sent Events stream at
 * /v1/dashboard/events. All three are served by every instance itself
 * (`local` routes): a follower forwards other calls and reads the leader's
 * whole answer first, which a stream never finishes. The stream's views
 * are read after a ReadIndex barrier, on a follower through the leader's
 * read index (dashboard/read-anywhere.ts, the one route http/follower-reads.ts
 * installs), so any instance shows what the
 * group has committed. With auth on, the stream
 * needs a token: the admin's sees everything, a tenant's its own tenant.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { dashboardAssets, dashboardPage, type LocksEvent, type StreamEventName } from '@fencer/dashboard-ui';
import { FleetFeed } from '../dashboard/fleet-feed.js';
import { narrowed, type Scope } from '../dashboard/fleet-view.js';
import { readableAnywhere } from '../dashboard/read-anywhere.js';
import { grpcWatchClient, TenantLocksHub, type WatchClientFactory } from '../dashboard/tenant-locks.js';
import { identify } from '../http/access.js';
import { routeConfig } from '../http/route-config.js';
import {
  dashboardIntervalMs,
  dashboardKeepAliveMs,
  dashboardRouteCheckMs,
  dashboardStreamBufferBytesMax,
  dashboardStreamsMax,
  dashboardWatchesMax,
} from '../limits.js';
import { ProblemError } from '../problems.js';
import type { AppMetrics } from '../http/request-metrics.js';
import type { RouteContext } from './route-context.js';

export type DashboardContext = RouteContext & {
  /** This instance's id, shown on the page. */
  readonly instanceId: string;
  /** How the lock watches reach a cell (tests may pass another). */
  readonly newWatchClient?: WatchClientFactory;
  readonly metrics?: Pick<AppMetrics, 'dashboardStreams' | 'dashboardWatches'>;
};

interface StreamQuery {
  readonly namespace?: string;
}

const streamSchema = {
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: { namespace: { type: 'string', minLength: 1, maxLength: 128 } },
  },
};

/** The scope of the request's token, and the tenant it may watch (its own, with a tenant token). */
async function scopeFor(ctx: DashboardContext, request: FastifyRequest): Promise<{ scope: Scope; namespace: string | undefined }> {
  const who = await identify(ctx, request);
  const { namespace } = request.query as StreamQuery;
  const scope: Scope = who.admin ? { admin: true } : { admin: false, namespace: who.tenant.namespace };
  if (!who.admin && namespace !== undefined && namespace !== who.tenant.namespace)
    throw new ProblemError('FORBIDDEN', `a tenant token reaches its own namespace (${who.tenant.namespace}) only`);
  if (namespace !== undefined && (await ctx.meta.read()).tenant(namespace) === undefined)
    throw new ProblemError('TENANT_NOT_FOUND', `no tenant "${namespace}"`);
  return { scope, namespace };
}

interface Stream {
  send(event: StreamEventName, data: unknown): void;
  end(): void;
}

/** Takes the connection from fastify and writes events on it; a client that does not read is cut off, and reconnects. */
function openStream(reply: FastifyReply, onEnd: () => void): Stream {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    connection: 'keep-alive',
  });
  res.write(': fencer dashboard\n\n');
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), dashboardKeepAliveMs);
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    clearInterval(keepAlive);
    onEnd();
    res.end();
  };
  res.on('close', end);
  return {
    send(event, data) {
      if (ended) return;
      if (res.writableLength > dashboardStreamBufferBytesMax) return end();
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    end,
  };
}

interface StreamParts {
  readonly ctx: DashboardContext;
  readonly feed: FleetFeed;
  readonly locks: TenantLocksHub;
  readonly streams: Set<Stream>;
}

function countStreams({ ctx, locks, streams }: StreamParts): void {
  ctx.metrics?.dashboardStreams?.set(streams.size);
  ctx.metrics?.dashboardWatches?.set(locks.size);
}

/** Checks the token and the bounds (answered as problems while the reply is fastify's), then hands the connection to the stream. */
async function serveStream(parts: StreamParts, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { ctx, feed, locks, streams } = parts;
  const { scope, namespace } = await scopeFor(ctx, request);
  if (streams.size >= dashboardStreamsMax)
    throw new ProblemError(
      'RESOURCE_EXHAUSTED',
      `this instance serves ${dashboardStreamsMax} dashboard streams at most; try another instance`,
    );
  if (namespace !== undefined && !locks.has(namespace) && locks.size >= dashboardWatchesMax)
    throw new ProblemError('RESOURCE_EXHAUSTED', `this instance watches ${dashboardWatchesMax} tenants at most; try another instance`);
  const unsubscribe: (() => void)[] = [];
  const stream = openStream(reply, () => {
    streams.delete(stream);
    for (const u of unsubscribe) u();
    countStreams(parts);
  });
  streams.add(stream);
  unsubscribe.push(
    feed.subscribe({
      onFleet: (event) => stream.send('fleet', narrowed(event, scope)),
      onProblem: (problem) => stream.send('problem', problem),
    }),
  );
  if (namespace !== undefined) unsubscribe.push(locks.subscribe(namespace, (event: LocksEvent) => stream.send('locks', event)));
  countStreams(parts);
}

export const dashboardRoutes: FastifyPluginAsync<DashboardContext> = async (app, leaderCtx) => {
  const ctx: DashboardContext = { ...leaderCtx, meta: readableAnywhere(leaderCtx.meta, leaderCtx.adminToken) };
  const assets = dashboardAssets();
  const page = dashboardPage({ auth: ctx.adminToken !== undefined });
  const feed = new FleetFeed({
    meta: ctx.meta,
    cells: ctx.cells,
    instanceId: ctx.instanceId,
    wallMs: ctx.wallMs,
    intervalMs: dashboardIntervalMs,
  });
  const locks = new TenantLocksHub({
    meta: ctx.meta,
    cells: ctx.cells,
    newClient: ctx.newWatchClient ?? grpcWatchClient,
    routeCheckMs: dashboardRouteCheckMs,
  });
  const streams = new Set<Stream>();
  app.addHook('preClose', async () => {
    for (const s of [...streams]) s.end();
    feed.close();
    locks.close();
  });

  const local = { config: routeConfig('public', true) };
  app.get('/', local, async (_request, reply) => reply.type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(page));
  for (const [url, asset] of assets)
    app.get(url, local, async (_request, reply) => reply.type(asset.type).header('cache-control', 'no-cache').send(asset.body));

  // Public at the hook: the handler identifies the token itself, since the scope shapes the whole stream.
  app.get('/v1/dashboard/events', { ...local, schema: streamSchema }, (request, reply) =>
    serveStream({ ctx, feed, locks, streams }, request, reply),
  );
};
