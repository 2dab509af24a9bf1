/**
 * GET /v1/routing: the routing table (namespace → cell) with its version,
 * read by routers and session proxies. With `sinceVersion` and `waitMs` it is
 * a long poll: the answer waits until the version passes `sinceVersion` or
 * `waitMs` runs out, whichever comes first.
 */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { routingObject, type RoutingObject } from '@fencer/contract';
import type { MetaStateMachine } from '@fencer/meta-fsm';
import { readState } from '../http/follower-reads.js';
import { followerReadConfig } from '../http/route-config.js';
import { routingWaitMsMax } from '../limits.js';
import type { MetaStore } from '../meta-group.js';
import { responseSchema } from '../openapi.js';
import type { RouteContext } from './route-context.js';

/** The routing table's writer: the state's routes as the contract's Routing object (@fencer/contract). */
export function routingTableJson(state: MetaStateMachine): RoutingObject {
  return routingObject(state.routingVersion, state.routes());
}

/**
 * Resolves once the routing version passes `sinceVersion`, `waitMs` ran out, the client went away, or
 * the app closes: `parked` holds a stop function per waiting poll, so a SIGTERM answers every parked
 * poll at once (the table as it is) and routers move on to another instance without waiting out waitMs.
 */
function waitForRouting(
  meta: MetaStore,
  request: FastifyRequest,
  sinceVersion: number,
  waitMs: number,
  parked: Set<() => void>,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      request.raw.off('close', stop);
      parked.delete(stop);
      resolve();
    };
    const cancel = meta.waitRouting(sinceVersion, waitMs, done);
    const stop = (): void => {
      cancel();
      done();
    };
    request.raw.on('close', stop);
    parked.add(stop);
  });
}

const routingQuery = {
  type: 'object',
  properties: { sinceVersion: { type: 'integer', minimum: 0 }, waitMs: { type: 'integer', minimum: 0, maximum: routingWaitMsMax } },
};

export const routingRoutes: FastifyPluginAsync<RouteContext> = async (app, { meta }) => {
  const parkedPolls = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const stop of [...parkedPolls]) stop();
  });

  app.get(
    '/v1/routing',
    {
      config: followerReadConfig('front-end'),
      schema: { querystring: routingQuery, response: { 200: responseSchema('/v1/routing', 'get', '200') } },
    },
    async (request) => {
      const { sinceVersion, waitMs } = request.query as { sinceVersion?: number; waitMs?: number };
      const state = await readState(meta, request);
      if (sinceVersion === undefined || !waitMs || state.routingVersion > sinceVersion) return routingTableJson(state);
      await waitForRouting(meta, request, sinceVersion, waitMs, parkedPolls);
      // The poll passed a read barrier (here or through the leader) before it parked: the state as applied here is at least as new.
      return routingTableJson(meta.state);
    },
  );
};
