/**
 * What each route declares about itself in its fastify `config`: who may
 * call it, and whether this instance serves it even as a follower. The
 * forwarding and access hooks read it; a request without one (an unknown
 * path) is left to the not-found handler.
 */
import type { FastifyRequest } from 'fastify';

/**
 * - public: anyone;
 * - admin: the admin token;
 * - tenant: the admin token, or a token of the tenant named by the `:namespace` path parameter;
 * - cell-reader: the admin token, or a token of a tenant placed on the `:cell` path parameter;
 * - front-end: the admin token, or the front-end token routers and proxies hold (routing, fleet status, auto-tenants).
 */
export type Access = 'public' | 'admin' | 'tenant' | 'cell-reader' | 'front-end';

export interface RouteConfig {
  readonly access: Access;
  /** Served by this instance itself, never forwarded to the leader. */
  readonly local?: boolean;
  /** A read a follower serves itself once its leader confirmed a read index (follower-reads.ts); forwarded when that fails. */
  readonly followerRead?: boolean;
}

export const routeConfig = (access: Access, local = false): RouteConfig => ({ access, local });
/** A read any member serves: the leader after a ReadIndex round, a follower after one through its leader. */
export const followerReadConfig = (access: Access): RouteConfig => ({ access, followerRead: true });

/** The route's declaration, or undefined for a request no route of the API matched. */
export function routeConfigOf(request: FastifyRequest): RouteConfig | undefined {
  const config = (request.routeOptions.config ?? {}) as Partial<RouteConfig>;
  return config.access === undefined ? undefined : (config as RouteConfig);
}
