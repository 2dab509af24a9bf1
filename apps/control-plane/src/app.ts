/**
 * The control plane's HTTP API (fastify), implementing
 * openapi/openapi.yaml. `buildApp(deps)` returns the app; main.ts only
 * listens, tests use inject().
 *
 * - Requests are validated, and responses serialised, with the contract's
 *   own JSON schemas through fastify's schema support.
 * - Every error is an RFC 9457 problem document with a stable code
 *   (problems.ts).
 * - State lives in the meta group (MetaStore): writes are proposed on its
 *   leader, and a follower forwards every request but health and the
 *   contract to the leader's URL. Reads wait for a ReadIndex round.
 * - Writes carry their Idempotency-Key into the log, so a retry gets the
 *   first answer even from a new leader. A retried tenant creation repeats
 *   the cell's claim (idempotent) but cannot show the token again: only its
 *   hash was kept.
 */
import { createHash, randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { FencerError } from '@fencer/base';
import {
  isMetaFailure,
  type MetaApplied,
  type MetaCommand,
  type MetaEntry,
  type MetaStateMachine,
  type Move,
  type SnapshotRecord,
  type Tenant,
} from '@fencer/meta-fsm';
import type { Counter, Histogram } from 'prom-client';
import { bearerOf, hashToken, newToken, sameSecret, tenantTokenValid } from './auth.js';
import type { CellDirectory } from './cells.js';
import { bodyBytesMax, forwardTimeoutMs, writesInFlightMax } from './limits.js';
import { isNotLeader, type MetaStore } from './meta-group.js';
import { contractAjv, contractSchema, openapi, ref, requestBodySchema, responseSchema } from './openapi.js';
import { PROBLEMS, ProblemError, problemOf, type ProblemCode } from './problems.js';

export interface AppMetrics {
  readonly requests: Counter<'route' | 'method' | 'status'>;
  readonly latency: Histogram<'route'>;
}

export interface ControlPlaneDeps {
  readonly meta: MetaStore;
  readonly cells: CellDirectory;
  /** Auth on: the admin token every admin call must bear. Absent: auth off (the local default). */
  readonly adminToken?: string;
  readonly wallMs?: () => number;
  readonly newId?: () => string;
  readonly newTenantToken?: () => string;
  /** A pino logger for fastify, or false. */
  readonly logger?: FastifyServerOptions['loggerInstance'] | false;
  readonly metrics?: AppMetrics;
}

type Access = 'public' | 'admin' | 'tenant' | 'cell-reader';
interface RouteConfig {
  readonly access: Access;
  /** Served by this instance itself, never forwarded to the leader. */
  readonly local?: boolean;
}

const FORWARDED_HEADER = 'x-fencer-forwarded';

const IDEMPOTENCY_HEADERS = {
  type: 'object',
  properties: { 'idempotency-key': (openapi.components.parameters['IdempotencyKey'] as { schema: unknown }).schema },
};

/** Stable JSON (keys sorted) for request fingerprints: the same body in another key order is the same request. */
function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function tenantJson(t: Tenant, state: MetaStateMachine): Record<string, unknown> {
  return {
    namespace: t.namespace,
    cell: t.cell,
    ...(t.owner !== undefined ? { owner: t.owner } : {}),
    createdAt: iso(t.createdAtMs),
    quotas: t.quotas,
    moving: state.isMoving(t.namespace),
  };
}

export function moveJson(m: Move): Record<string, unknown> {
  return {
    id: m.id,
    namespace: m.namespace,
    fromCell: m.fromCell,
    toCell: m.toCell,
    state: m.state,
    createdAt: iso(m.createdAtMs),
    ...(m.finishedAtMs !== undefined ? { finishedAt: iso(m.finishedAtMs) } : {}),
    ...(m.error !== undefined ? { error: m.error } : {}),
  };
}

export function snapshotJson(s: SnapshotRecord): Record<string, unknown> {
  const { createdAtMs, ...rest } = s;
  return { ...rest, createdAt: iso(createdAtMs) };
}

export async function buildApp(deps: ControlPlaneDeps): Promise<FastifyInstance> {
  const wallMs = deps.wallMs ?? (() => Date.now());
  const newId = deps.newId ?? (() => randomUUID());
  const newTenantToken = deps.newTenantToken ?? (() => newToken('tenant'));
  const { meta, cells } = deps;
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: bodyBytesMax,
    routerOptions: { maxParamLength: 256 },
  });
  // Extra fields are refused (the contract's additionalProperties: false), never silently dropped. Bodies keep their
  // JSON types; query strings, headers and path params (always strings) are coerced to their schemas' types.
  const bodyAjv = contractAjv({ coerceTypes: false });
  const stringAjv = contractAjv({ coerceTypes: true });
  app.addSchema(contractSchema());
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : stringAjv).compile(schema));

  let writesInFlight = 0;

  // ------------------------------------------------------------ errors

  const sendProblem = (reply: FastifyReply, code: ProblemCode, detail?: string): FastifyReply =>
    reply.code(PROBLEMS[code].status).type('application/problem+json').send(problemOf(code, detail));

  app.setErrorHandler((error: Error & { statusCode?: number; validation?: unknown; code?: string }, request, reply) => {
    if (error instanceof ProblemError) return sendProblem(reply, error.code, error.detail);
    if (error.validation !== undefined) return sendProblem(reply, 'INVALID_REQUEST', error.message);
    if (isNotLeader(error))
      return sendProblem(reply, 'NOT_LEADER', `the meta group has no reachable leader right now (${error.message}); retry`);
    if (error instanceof FencerError && error.code === 'TOO_MANY_REQUESTS') return sendProblem(reply, 'RESOURCE_EXHAUSTED', error.message);
    if (
      error instanceof FencerError &&
      (error.code === 'SHUTTING_DOWN' || error.code === 'DEADLINE_EXCEEDED' || error.code === 'OUTCOME_UNKNOWN')
    ) {
      return sendProblem(reply, 'NOT_LEADER', `${error.message}; retry with the same Idempotency-Key`);
    }
    const status = error.statusCode ?? 500;
    if (status === 413) return sendProblem(reply, 'PAYLOAD_TOO_LARGE', `bodies are at most ${bodyBytesMax} bytes`);
    if (status === 415) return sendProblem(reply, 'UNSUPPORTED_MEDIA_TYPE', error.message);
    if (status === 404) return sendProblem(reply, 'NOT_FOUND', error.message);
    if (status >= 400 && status < 500) return sendProblem(reply, 'INVALID_REQUEST', error.message);
    request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, 'INTERNAL', 'an internal error; it was logged');
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`));

  // Long polls parked on GET /v1/routing: answered at once (the table as it is) when the app closes, so a
  // SIGTERM does not wait out their waitMs and routers move on to another instance straight away.
  const parkedPolls = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const stop of [...parkedPolls]) stop();
  });

  if (deps.metrics) {
    const { requests, latency } = deps.metrics;
    app.addHook('onResponse', async (request, reply) => {
      const route = request.routeOptions.url ?? 'unmatched';
      requests.inc({ route, method: request.method, status: String(reply.statusCode) });
      latency.observe({ route }, reply.elapsedTime / 1000);
    });
  }

  // ---------------------------------------------- forwarding and auth

  app.addHook('preValidation', async (request, reply) => {
    const config = (request.routeOptions.config ?? {}) as Partial<RouteConfig>;
    if (config.access === undefined) return;
    if (!config.local && !meta.isLeader) {
      await forward(request, reply);
      return reply;
    }
    await authorize(request, config.access);
    return undefined;
  });

  async function forward(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const leader = meta.leader;
    const url = leader === null ? undefined : meta.leaderAddress();
    if (request.headers[FORWARDED_HEADER] !== undefined || url === undefined) {
      throw new ProblemError(
        'NOT_LEADER',
        leader === null ? 'the meta group has no leader right now; retry' : `the leader ${leader} has no known URL; retry`,
      );
    }
    const headers: Record<string, string> = { [FORWARDED_HEADER]: '1' };
    for (const h of ['authorization', 'content-type', 'idempotency-key']) {
      const v = request.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const waitMs = Number((request.query as { waitMs?: unknown } | undefined)?.waitMs ?? 0);
    const timeoutMs = forwardTimeoutMs + (Number.isFinite(waitMs) ? Math.min(waitMs, 60_000) : 0);
    let res: Response;
    try {
      res = await fetch(`${url}${request.url}`, {
        method: request.method,
        headers,
        ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      throw new ProblemError(
        'NOT_LEADER',
        `the leader ${leader} did not answer (${(e as Error).message}); retry with the same Idempotency-Key`,
      );
    }
    const text = await res.text();
    reply.code(res.status);
    const type = res.headers.get('content-type');
    if (type) reply.header('content-type', type);
    await reply.send(text);
  }

  async function authorize(request: FastifyRequest, access: Access): Promise<void> {
    if (deps.adminToken === undefined || access === 'public') return;
    const token = bearerOf(request.headers.authorization);
    if (token === undefined) throw new ProblemError('UNAUTHENTICATED', 'send Authorization: Bearer <token> (an admin or tenant token)');
    if (sameSecret(token, deps.adminToken)) return;
    const state = await meta.read();
    const params = request.params as { namespace?: string; cell?: string };
    const now = wallMs();
    const own = state.tenants().find((t) => tenantTokenValid(t, token, now));
    if (own === undefined) throw new ProblemError('UNAUTHENTICATED', 'this token is not valid (unknown, or rotated out)');
    const allowed = (access === 'tenant' && params.namespace === own.namespace) || (access === 'cell-reader' && params.cell === own.cell);
    if (!allowed) throw new ProblemError('FORBIDDEN', `a tenant token reaches its own namespace (${own.namespace}) only`);
  }

  // ------------------------------------------------------------- writes

  async function write(request: FastifyRequest, command: MetaCommand): Promise<MetaApplied> {
    if (writesInFlight >= writesInFlightMax)
      throw new ProblemError('RESOURCE_EXHAUSTED', `more than ${writesInFlightMax} writes in flight here; retry`);
    const key = request.headers['idempotency-key'];
    const entry: MetaEntry =
      typeof key === 'string' && key !== ''
        ? {
            command,
            idempotency: {
              key,
              fingerprint: createHash('sha256')
                .update(
                  `${request.method} ${request.url.split('?')[0]}\n${stableJson(request.query ?? {})}\n${stableJson(request.body ?? null)}`,
                )
                .digest('hex'),
            },
          }
        : { command };
    writesInFlight++;
    try {
      const applied = await meta.write(entry);
      if (isMetaFailure(applied.outcome)) throw new ProblemError(applied.outcome.code, applied.outcome.detail);
      return applied;
    } finally {
      writesInFlight--;
    }
  }

  const cellMustExist = (cell: string): void => {
    if (!cells.has(cell))
      throw new ProblemError('CELL_NOT_FOUND', `no cell "${cell}"; known cells: ${cells.cellIds().join(', ') || 'none'}`);
  };

  /** The cell with the fewest live sessions (then the fewest tenants, then the smallest id). */
  function placeTenant(state: MetaStateMachine): string {
    const views = cells.status();
    if (views.length === 0) throw new ProblemError('CELL_NOT_FOUND', 'this control plane manages no cells; give it a cell list');
    const tenantsOn = new Map<string, number>();
    for (const r of state.routes()) tenantsOn.set(r.cell, (tenantsOn.get(r.cell) ?? 0) + 1);
    const score = (v: (typeof views)[number]): [number, number, string] => [v.sessions, tenantsOn.get(v.id) ?? 0, v.id];
    return [...views].sort((a, b) => {
      const [sa, ta, ia] = score(a);
      const [sb, tb, ib] = score(b);
      return sa - sb || ta - tb || (ia < ib ? -1 : ia > ib ? 1 : 0);
    })[0]!.id;
  }

  // ------------------------------------------------------------- routes

  const cfg = (access: Access, local = false): RouteConfig => ({ access, local });

  app.get('/v1/openapi.json', { config: cfg('public', true) }, async () => openapi);

  app.get('/v1/health', { config: cfg('public', true) }, async (_request, reply) => {
    if (meta.isLeader) return { status: 'ok', role: 'leader' };
    const leader = meta.leader;
    if (leader !== null && meta.leaderAddress() !== undefined) return { status: 'ok', role: 'follower', leader };
    return sendProblem(reply, 'NOT_LEADER', 'this instance neither leads the meta group nor knows its leader');
  });

  app.get('/v1/fleet', { config: cfg('admin'), schema: { response: { 200: responseSchema('/v1/fleet', 'get', '200') } } }, async () => {
    const state = await meta.read();
    const namespacesOf = new Map<string, string[]>();
    for (const r of state.routes()) namespacesOf.set(r.cell, [...(namespacesOf.get(r.cell) ?? []), r.namespace]);
    return {
      routingVersion: state.routingVersion,
      cells: cells.status().map((c) => ({
        id: c.id,
        leader: c.leader,
        ...(c.term !== undefined ? { term: c.term } : {}),
        namespaces: namespacesOf.get(c.id) ?? [],
        replicas: c.replicas,
      })),
    };
  });

  const routingOf = (state: MetaStateMachine) => ({
    version: state.routingVersion,
    routes: state.routes().map((r) => ({ namespace: r.namespace, cell: r.cell, state: r.state })),
  });

  app.get(
    '/v1/routing',
    {
      config: cfg('admin'),
      schema: {
        querystring: {
          type: 'object',
          properties: { sinceVersion: { type: 'integer', minimum: 0 }, waitMs: { type: 'integer', minimum: 0, maximum: 60000 } },
        },
        response: { 200: responseSchema('/v1/routing', 'get', '200') },
      },
    },
    async (request) => {
      const { sinceVersion, waitMs } = request.query as { sinceVersion?: number; waitMs?: number };
      const state = await meta.read();
      if (sinceVersion === undefined || !waitMs || state.routingVersion > sinceVersion) return routingOf(state);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          request.raw.off('close', stop);
          parkedPolls.delete(stop);
          resolve();
        };
        const cancel = meta.waitRouting(sinceVersion, waitMs, done);
        const stop = (): void => {
          cancel();
          done();
        };
        request.raw.on('close', stop);
        parkedPolls.add(stop);
      });
      return routingOf(meta.state);
    },
  );

  app.get('/v1/tenants', { config: cfg('admin'), schema: { response: { 200: responseSchema('/v1/tenants', 'get', '200') } } }, async () => {
    const state = await meta.read();
    return { tenants: state.tenants().map((t) => tenantJson(t, state)) };
  });

  app.post(
    '/v1/tenants',
    {
      config: cfg('admin'),
      schema: {
        headers: IDEMPOTENCY_HEADERS,
        body: requestBodySchema('/v1/tenants', 'post'),
        response: { 201: responseSchema('/v1/tenants', 'post', '201') },
      },
    },
    async (request, reply) => {
      const body = request.body as { namespace: string; cell?: string; owner?: string; quotas?: Record<string, number> };
      const state = await meta.read();
      const cell = body.cell ?? placeTenant(state);
      cellMustExist(cell);
      const token = deps.adminToken !== undefined ? newTenantToken() : undefined;
      const applied = await write(request, {
        kind: 'CreateTenant',
        namespace: body.namespace,
        cell,
        ...(body.owner !== undefined ? { owner: body.owner } : {}),
        ...(body.quotas !== undefined ? { quotas: body.quotas } : {}),
        ...(token !== undefined ? { tokenHash: hashToken(token) } : {}),
        atMs: wallMs(),
      });
      const tenant = (applied.outcome as { tenant: Tenant }).tenant;
      // The meta group decided the one cell; only now does that cell claim the namespace, so no two cells ever do.
      await cells.claim(tenant.cell, tenant.namespace);
      reply.code(201);
      return { ...tenantJson(tenant, meta.state), ...(token !== undefined && !applied.replayed ? { token } : {}) };
    },
  );

  const namespaceParams = { type: 'object', required: ['namespace'], properties: { namespace: ref('NamespaceName') } };

  app.get(
    '/v1/tenants/:namespace',
    {
      config: cfg('tenant'),
      schema: { params: namespaceParams, response: { 200: responseSchema('/v1/tenants/{namespace}', 'get', '200') } },
    },
    async (request) => {
      const { namespace } = request.params as { namespace: string };
      const state = await meta.read();
      const tenant = state.tenant(namespace);
      if (tenant === undefined) throw new ProblemError('TENANT_NOT_FOUND', `no tenant "${namespace}"`);
      return tenantJson(tenant, state);
    },
  );

  app.patch(
    '/v1/tenants/:namespace',
    {
      config: cfg('admin'),
      schema: {
        params: namespaceParams,
        headers: IDEMPOTENCY_HEADERS,
        body: requestBodySchema('/v1/tenants/{namespace}', 'patch'),
        response: { 200: responseSchema('/v1/tenants/{namespace}', 'patch', '200') },
      },
    },
    async (request) => {
      const { namespace } = request.params as { namespace: string };
      const body = request.body as { quotas?: Record<string, number> };
      const applied = await write(request, { kind: 'UpdateTenant', namespace, quotas: body.quotas ?? {} });
      return tenantJson((applied.outcome as { tenant: Tenant }).tenant, meta.state);
    },
  );

  app.delete(
    '/v1/tenants/:namespace',
    {
      config: cfg('admin'),
      schema: {
        params: namespaceParams,
        headers: IDEMPOTENCY_HEADERS,
        querystring: { type: 'object', properties: { force: { type: 'boolean' } } },
      },
    },
    async (request, reply) => {
      const { namespace } = request.params as { namespace: string };
      const { force } = request.query as { force?: boolean };
      const state = await meta.read();
      const tenant = state.tenant(namespace);
      if (tenant !== undefined) {
        if (state.isMoving(namespace))
          throw new ProblemError('MOVE_IN_PROGRESS', `tenant "${namespace}" is being moved; wait for the move to finish`);
        if (cells.has(tenant.cell)) {
          const dropped = await cells.drop(tenant.cell, namespace, force === true);
          if (dropped === 'not-empty')
            throw new ProblemError(
              'TENANT_NOT_EMPTY',
              `tenant "${namespace}" has live sessions on ${tenant.cell}; delete with ?force=true to expire them`,
            );
        }
      }
      // Also for an unknown tenant: the log answers TENANT_NOT_FOUND, or replays a delete done under the same Idempotency-Key.
      await write(request, { kind: 'DeleteTenant', namespace });
      return reply.code(204).send();
    },
  );

  app.post(
    '/v1/tenants/:namespace/token',
    {
      config: cfg('tenant'),
      schema: {
        params: namespaceParams,
        headers: IDEMPOTENCY_HEADERS,
        body: requestBodySchema('/v1/tenants/{namespace}/token', 'post'),
        response: { 200: responseSchema('/v1/tenants/{namespace}/token', 'post', '200') },
      },
    },
    async (request) => {
      const { namespace } = request.params as { namespace: string };
      const body = (request.body ?? {}) as { graceMs?: number };
      const token = newTenantToken();
      const applied = await write(request, {
        kind: 'RotateToken',
        namespace,
        tokenHash: hashToken(token),
        graceMs: body.graceMs ?? 0,
        atMs: wallMs(),
      });
      if (applied.replayed)
        throw new ProblemError(
          'IDEMPOTENCY_KEY_REUSED',
          'this rotation happened already and its token was shown once; rotate again with a new key',
        );
      return { token };
    },
  );

  app.get('/v1/moves', { config: cfg('admin'), schema: { response: { 200: responseSchema('/v1/moves', 'get', '200') } } }, async () => {
    const state = await meta.read();
    return { moves: state.moves().map(moveJson) };
  });

  app.post(
    '/v1/moves',
    {
      config: cfg('admin'),
      schema: {
        headers: IDEMPOTENCY_HEADERS,
        body: requestBodySchema('/v1/moves', 'post'),
        response: { 202: responseSchema('/v1/moves', 'post', '202') },
      },
    },
    async (request, reply) => {
      const body = request.body as { namespace: string; toCell: string };
      cellMustExist(body.toCell);
      const applied = await write(request, {
        kind: 'StartMove',
        id: newId(),
        namespace: body.namespace,
        toCell: body.toCell,
        atMs: wallMs(),
      });
      reply.code(202);
      return moveJson((applied.outcome as { move: Move }).move);
    },
  );

  app.get(
    '/v1/moves/:id',
    {
      config: cfg('admin'),
      schema: {
        params: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } },
        response: { 200: responseSchema('/v1/moves/{id}', 'get', '200') },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const move = (await meta.read()).move(id);
      if (move === undefined) throw new ProblemError('MOVE_NOT_FOUND', `no move "${id}"`);
      return moveJson(move);
    },
  );

  const cellParams = { type: 'object', required: ['cell'], properties: { cell: { type: 'string' } } };

  app.get(
    '/v1/cells/:cell/snapshots',
    {
      config: cfg('cell-reader'),
      schema: { params: cellParams, response: { 200: responseSchema('/v1/cells/{cell}/snapshots', 'get', '200') } },
    },
    async (request) => {
      const { cell } = request.params as { cell: string };
      cellMustExist(cell);
      const state = await meta.read();
      return {
        snapshots: state
          .snapshotRecords()
          .filter((s) => s.cell === cell)
          .reverse()
          .map(snapshotJson),
      };
    },
  );

  app.post(
    '/v1/cells/:cell/snapshots',
    {
      config: cfg('admin'),
      schema: {
        params: cellParams,
        headers: IDEMPOTENCY_HEADERS,
        response: { 202: responseSchema('/v1/cells/{cell}/snapshots', 'post', '202') },
      },
    },
    async (request, reply) => {
      const { cell } = request.params as { cell: string };
      cellMustExist(cell);
      const applied = await write(request, { kind: 'RecordSnapshot', id: newId(), cell, atMs: wallMs() });
      reply.code(202);
      return snapshotJson((applied.outcome as { snapshot: SnapshotRecord }).snapshot);
    },
  );

  app.get(
    '/v1/cells/:cell/snapshots/:id',
    {
      config: cfg('admin'),
      schema: {
        params: { type: 'object', required: ['cell', 'id'], properties: { cell: { type: 'string' }, id: { type: 'string' } } },
        response: { 200: responseSchema('/v1/cells/{cell}/snapshots/{id}', 'get', '200') },
      },
    },
    async (request) => {
      const { cell, id } = request.params as { cell: string; id: string };
      cellMustExist(cell);
      const snapshot = (await meta.read()).snapshotRecord(id);
      if (snapshot === undefined || snapshot.cell !== cell)
        throw new ProblemError('SNAPSHOT_NOT_FOUND', `no snapshot "${id}" of cell ${cell}`);
      return snapshotJson(snapshot);
    },
  );

  return app;
}
