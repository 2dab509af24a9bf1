/**
 * Who may call what (the route's `config.access`, route-config.ts). With
 * auth off (no admin token) every call is allowed. With auth on, the admin
 * token reaches everything; a tenant token reaches its own tenant, and the
 * snapshots of the cell its namespace is on; the front-end token (routers'
 * and proxies') reads the routing table, fleet status and the tenant list
 * (routers take each tenant's acquire rate from it) and creates tenants
 * (auto-tenants), and nothing else. Tenant tokens are checked
 * against the hashes in the meta group's state as of a linearizable read, so
 * a rotation applied anywhere is seen here.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Tenant } from '@fencer/meta-fsm';
import { bearerOf, sameSecret, tenantTokenValid } from '../auth.js';
import type { MetaStore } from '../meta-group.js';
import { ProblemError } from '../problems.js';
import { routeConfigOf, type Access } from './route-config.js';

export interface AccessDeps {
  readonly meta: MetaStore;
  /** Absent: auth off. */
  readonly adminToken: string | undefined;
  /** The front ends' narrower credential (decision 0016); absent: only the admin token reaches front-end routes. */
  readonly frontEndToken?: string | undefined;
  readonly wallMs: () => number;
}

/** Installs the access hook on the root instance, after the forwarding hook (a follower leaves this to the leader). */
export function installAccessChecks(app: FastifyInstance, deps: AccessDeps): void {
  app.addHook('preValidation', async (request) => {
    const config = routeConfigOf(request);
    if (config !== undefined) await authorize(deps, request, config.access);
  });
}

/** Who bears the request's token: the admin (or anyone, with auth off), or a tenant. Throws UNAUTHENTICATED for no or an unknown token. */
export async function identify(deps: AccessDeps, request: FastifyRequest): Promise<{ admin: true } | { admin: false; tenant: Tenant }> {
  if (deps.adminToken === undefined) return { admin: true };
  const token = bearerOf(request.headers.authorization);
  if (token === undefined) throw new ProblemError('UNAUTHENTICATED', 'send Authorization: Bearer <token> (an admin or tenant token)');
  if (sameSecret(token, deps.adminToken)) return { admin: true };
  const state = await deps.meta.read();
  const now = deps.wallMs();
  const own = state.tenants().find((t) => tenantTokenValid(t, token, now));
  if (own === undefined) throw new ProblemError('UNAUTHENTICATED', 'this token is not valid (unknown, or rotated out)');
  return { admin: false, tenant: own };
}

async function authorize(deps: AccessDeps, request: FastifyRequest, access: Access): Promise<void> {
  if (deps.adminToken === undefined || access === 'public') return;
  const token = bearerOf(request.headers.authorization);
  if (token !== undefined && deps.frontEndToken !== undefined && sameSecret(token, deps.frontEndToken)) {
    if (access === 'front-end') return;
    throw new ProblemError(
      'FORBIDDEN',
      'the front-end token reads routing, fleet status and the tenant list and creates tenants only; this needs the admin token',
    );
  }
  const who = await identify(deps, request);
  if (who.admin) return;
  const own = who.tenant;
  const params = request.params as { namespace?: string; cell?: string };
  const allowed = (access === 'tenant' && params.namespace === own.namespace) || (access === 'cell-reader' && params.cell === own.cell);
  if (!allowed) throw new ProblemError('FORBIDDEN', `a tenant token reaches its own namespace (${own.namespace}) only`);
}
