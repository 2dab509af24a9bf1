/**
 * GET /v1/health and GET /v1/openapi.json: served by every instance itself,
 * never forwarded, and open to anyone. A load balancer keeps an instance that
 * leads the meta group or knows who does.
 */
import type { FastifyPluginAsync } from 'fastify';
import { sendProblem } from '../http/problem-replies.js';
import { routeConfig } from '../http/route-config.js';
import { openapi } from '../openapi.js';
import type { RouteContext } from './route-context.js';

export const healthRoutes: FastifyPluginAsync<RouteContext> = async (app, { meta }) => {
  app.get('/v1/openapi.json', { config: routeConfig('public', true) }, async () => openapi);

  app.get('/v1/health', { config: routeConfig('public', true) }, async (_request, reply) => {
    if (meta.isLeader) return { status: 'ok', role: 'leader' };
    const leader = meta.leader;
    if (leader !== null && meta.leaderAddress() !== undefined) return { status: 'ok', role: 'follower', leader };
    return sendProblem(reply, 'NOT_LEADER', 'this instance neither leads the meta group nor knows its leader');
  });
};
