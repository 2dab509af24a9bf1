/**
 * /v1/tenants: tenants, their namespaces, quotas and tokens. The meta group
 * decides a tenant's one cell first; only then does that cell claim the
 * namespace, so no two cells ever do. A delete drops the namespace on its
 * cell first (refused while it has live sessions, unless forced), then
 * removes the record. A retried creation repeats the cell's claim
 * (idempotent) but cannot show the token again: only its hash was kept.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { leastLoadedCell, namespacesPerCell } from '@fencer/contract';
import type { MetaStateMachine, Tenant } from '@fencer/meta-fsm';
import { hashToken } from '../auth.js';
import type { CellDirectory } from '../cells.js';
import { IDEMPOTENCY_HEADERS } from '../http/idempotency.js';
import { routeConfig } from '../http/route-config.js';
import { ref, requestBodySchema, responseSchema } from '../openapi.js';
import { ProblemError } from '../problems.js';
import { tenantJson } from '../resource-json.js';
import { pushCredentials } from '../tenant-credentials.js';
import { hasCellQuotas, pushQuotas, usageOf } from '../tenant-quotas.js';
import { cellMustExist, type RouteContext } from './route-context.js';

/** Where a new tenant goes when its creator names no cell: the contract's one placement rule over the cells' live sessions. */
export function placeTenant(state: MetaStateMachine, cells: CellDirectory): string {
  const cell = leastLoadedCell(cells.status(), namespacesPerCell(state.routes()));
  if (cell === undefined) throw new ProblemError('CELL_NOT_FOUND', 'this control plane manages no cells; give it a cell list');
  return cell;
}

interface CreateTenantBody {
  readonly namespace: string;
  readonly cell?: string;
  readonly owner?: string;
  readonly quotas?: Record<string, number>;
}

async function createTenant(ctx: RouteContext, request: FastifyRequest, reply: FastifyReply): Promise<Record<string, unknown>> {
  const body = request.body as CreateTenantBody;
  const state = await ctx.meta.read();
  const cell = body.cell ?? placeTenant(state, ctx.cells);
  cellMustExist(ctx.cells, cell);
  const token = ctx.adminToken !== undefined ? ctx.newTenantToken() : undefined;
  const applied = await ctx.write(request, {
    kind: 'CreateTenant',
    namespace: body.namespace,
    cell,
    ...(body.owner !== undefined ? { owner: body.owner } : {}),
    ...(body.quotas !== undefined ? { quotas: body.quotas } : {}),
    ...(token !== undefined ? { tokenHash: hashToken(token) } : {}),
    atMs: ctx.wallMs(),
  });
  const tenant = (applied.outcome as { tenant: Tenant }).tenant;
  // The meta group decided the one cell; only now does that cell claim the namespace, so no two cells ever do.
  // A cell that cannot claim it now gets it from the ownership reconciler once it answers.
  await ctx.cells.claim(tenant.cell, tenant.namespace).catch((e: unknown) => {
    ctx.wake('ownership');
    throw e;
  });
  // Then its quotas (a fresh claim has none): a cell that does not take them now gets them from the reconciler.
  if (hasCellQuotas(tenant.quotas) && !(await pushQuotas(ctx.cells, tenant, request.log))) ctx.wake('ownership');
  // And its token's hash, so its first call is let in: the same fallback.
  if (tenant.tokenHashes.length > 0 && !(await pushCredentials(ctx.cells, tenant, request.log))) ctx.wake('ownership');
  reply.code(201);
  return { ...tenantJson(tenant, ctx.meta.state), ...(token !== undefined && !applied.replayed ? { token } : {}) };
}

async function getTenant(ctx: RouteContext, request: FastifyRequest): Promise<Record<string, unknown>> {
  const { namespace } = request.params as { namespace: string };
  const state = await ctx.meta.read();
  const tenant = state.tenant(namespace);
  if (tenant === undefined) throw new ProblemError('TENANT_NOT_FOUND', `no tenant "${namespace}"`);
  const usage = await usageOf(ctx.cells, [tenant]);
  return tenantJson(tenant, state, usage.get(namespace));
}

async function updateTenant(ctx: RouteContext, request: FastifyRequest): Promise<Record<string, unknown>> {
  const { namespace } = request.params as { namespace: string };
  const body = request.body as { quotas?: Record<string, number> };
  const applied = await ctx.write(request, { kind: 'UpdateTenant', namespace, quotas: body.quotas ?? {} });
  const tenant = (applied.outcome as { tenant: Tenant }).tenant;
  // Applies on the cell at once, with no restart; while it moves (frozen) the reconciler sends them to where it lands.
  if (!(await pushQuotas(ctx.cells, tenant, request.log))) ctx.wake('ownership');
  return tenantJson(tenant, ctx.meta.state);
}

/** Drops the namespace on its cell before the record goes: a cell never serves a namespace the table no longer has. */
async function dropOnCell(ctx: RouteContext, state: MetaStateMachine, tenant: Tenant, force: boolean): Promise<void> {
  const { namespace } = tenant;
  if (state.isMoving(namespace))
    throw new ProblemError('MOVE_IN_PROGRESS', `tenant "${namespace}" is being moved; wait for the move to finish`);
  if (!ctx.cells.has(tenant.cell)) return;
  const dropped = await ctx.cells.drop(tenant.cell, namespace, force);
  if (dropped === 'not-empty')
    throw new ProblemError(
      'TENANT_NOT_EMPTY',
      `tenant "${namespace}" has live sessions on ${tenant.cell}; delete with ?force=true to expire them`,
    );
}

async function deleteTenant(ctx: RouteContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { namespace } = request.params as { namespace: string };
  const { force } = request.query as { force?: boolean };
  const state = await ctx.meta.read();
  const tenant = state.tenant(namespace);
  if (tenant !== undefined) await dropOnCell(ctx, state, tenant, force === true);
  // Also for an unknown tenant: the log answers TENANT_NOT_FOUND, or replays a delete done under the same Idempotency-Key.
  await ctx.write(request, { kind: 'DeleteTenant', namespace });
  return reply.code(204).send();
}

async function rotateToken(ctx: RouteContext, request: FastifyRequest): Promise<{ token: string }> {
  const { namespace } = request.params as { namespace: string };
  const body = (request.body ?? {}) as { graceMs?: number };
  const token = ctx.newTenantToken();
  const applied = await ctx.write(request, {
    kind: 'RotateToken',
    namespace,
    tokenHash: hashToken(token),
    graceMs: body.graceMs ?? 0,
    atMs: ctx.wallMs(),
  });
  if (applied.replayed)
    throw new ProblemError(
      'IDEMPOTENCY_KEY_REUSED',
      'this rotation happened already and its token was shown once; rotate again with a new key',
    );
  // At once on the tenant's cell, so the old token stops at the end of its grace (at once with none) within
  // this call; a cell that does not take them now (moving, no leader) gets them from the woken reconciler.
  const tenant = ctx.meta.state.tenant(namespace);
  if (tenant !== undefined && !(await pushCredentials(ctx.cells, tenant, request.log))) ctx.wake('ownership');
  return { token };
}

const namespaceParams = { type: 'object', required: ['namespace'], properties: { namespace: ref('NamespaceName') } };
const ONE_TENANT = '/v1/tenants/{namespace}';

export const tenantRoutes: FastifyPluginAsync<RouteContext> = async (app, ctx) => {
  const list = { response: { 200: responseSchema('/v1/tenants', 'get', '200') } };
  app.get('/v1/tenants', { config: routeConfig('front-end'), schema: list }, async () => {
    const state = await ctx.meta.read();
    const tenants = state.tenants();
    const usage = await usageOf(ctx.cells, tenants);
    return { tenants: tenants.map((t) => tenantJson(t, state, usage.get(t.namespace))) };
  });
  const create = {
    headers: IDEMPOTENCY_HEADERS,
    body: requestBodySchema('/v1/tenants', 'post'),
    response: { 201: responseSchema('/v1/tenants', 'post', '201') },
  };
  app.post('/v1/tenants', { config: routeConfig('front-end'), schema: create }, (request, reply) => createTenant(ctx, request, reply));
  const get = { params: namespaceParams, response: { 200: responseSchema(ONE_TENANT, 'get', '200') } };
  app.get('/v1/tenants/:namespace', { config: routeConfig('tenant'), schema: get }, (request) => getTenant(ctx, request));
  const update = {
    params: namespaceParams,
    headers: IDEMPOTENCY_HEADERS,
    body: requestBodySchema(ONE_TENANT, 'patch'),
    response: { 200: responseSchema(ONE_TENANT, 'patch', '200') },
  };
  app.patch('/v1/tenants/:namespace', { config: routeConfig('admin'), schema: update }, (request) => updateTenant(ctx, request));
  const remove = {
    params: namespaceParams,
    headers: IDEMPOTENCY_HEADERS,
    querystring: { type: 'object', properties: { force: { type: 'boolean' } } },
  };
  app.delete('/v1/tenants/:namespace', { config: routeConfig('admin'), schema: remove }, (request, reply) =>
    deleteTenant(ctx, request, reply),
  );
  const rotate = {
    params: namespaceParams,
    headers: IDEMPOTENCY_HEADERS,
    body: requestBodySchema('/v1/tenants/{namespace}/token', 'post'),
    response: { 200: responseSchema('/v1/tenants/{namespace}/token', 'post', '200') },
  };
  app.post('/v1/tenants/:namespace/token', { config: routeConfig('tenant'), schema: rotate }, (request) => rotateToken(ctx, request));
};
