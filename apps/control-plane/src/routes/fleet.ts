/** GET /v1/fleet: every cell as last polled, with the namespaces the routing table puts on it. */
import type { FastifyPluginAsync } from 'fastify';
import type { MetaStateMachine } from '@fencer/meta-fsm';
import type { CellDirectory } from '../cells.js';
import { readState } from '../http/follower-reads.js';
import { followerReadConfig } from '../http/route-config.js';
import { responseSchema } from '../openapi.js';
import type { RouteContext } from './route-context.js';

function fleetJson(state: MetaStateMachine, cells: CellDirectory): Record<string, unknown> {
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
}

export const fleetRoutes: FastifyPluginAsync<RouteContext> = async (app, { meta, cells }) => {
  app.get(
    '/v1/fleet',
    { config: followerReadConfig('front-end'), schema: { response: { 200: responseSchema('/v1/fleet', 'get', '200') } } },
    async (request) => fleetJson(await readState(meta, request), cells),
  );
};
