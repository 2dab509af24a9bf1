/**
 * /v1/moves: the move journal (docs/decisions/0011-moves-are-journaled-steps.md).
 * POST records the start of moving a namespace to another cell and answers
 * 202 at once; GET shows the state each move has reached.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Move } from '@fencer/meta-fsm';
import { IDEMPOTENCY_HEADERS } from '../http/idempotency.js';
import { routeConfig } from '../http/route-config.js';
import { requestBodySchema, responseSchema } from '../openapi.js';
import { ProblemError } from '../problems.js';
import { moveJson } from '../resource-json.js';
import { cellMustExist, type RouteContext } from './route-context.js';

async function startMove(ctx: RouteContext, request: FastifyRequest, reply: FastifyReply): Promise<Record<string, unknown>> {
  const body = request.body as { namespace: string; toCell: string };
  cellMustExist(ctx.cells, body.toCell);
  const applied = await ctx.write(request, {
    kind: 'StartMove',
    id: ctx.newId(),
    namespace: body.namespace,
    toCell: body.toCell,
    atMs: ctx.wallMs(),
  });
  ctx.wake('moves');
  reply.code(202);
  return moveJson((applied.outcome as { move: Move }).move);
}

async function getMove(ctx: RouteContext, request: FastifyRequest): Promise<Record<string, unknown>> {
  const { id } = request.params as { id: string };
  const move = (await ctx.meta.read()).move(id);
  if (move === undefined) throw new ProblemError('MOVE_NOT_FOUND', `no move "${id}"`);
  return moveJson(move);
}

export const moveRoutes: FastifyPluginAsync<RouteContext> = async (app, ctx) => {
  const list = { response: { 200: responseSchema('/v1/moves', 'get', '200') } };
  app.get('/v1/moves', { config: routeConfig('admin'), schema: list }, async () => {
    const state = await ctx.meta.read();
    return { moves: state.moves().map(moveJson) };
  });
  const start = {
    headers: IDEMPOTENCY_HEADERS,
    body: requestBodySchema('/v1/moves', 'post'),
    response: { 202: responseSchema('/v1/moves', 'post', '202') },
  };
  app.post('/v1/moves', { config: routeConfig('admin'), schema: start }, (request, reply) => startMove(ctx, request, reply));
  const get = {
    params: { type: 'object', required: ['id'], properties: { id: { type: 'string' } } },
    response: { 200: responseSchema('/v1/moves/{id}', 'get', '200') },
  };
  app.get('/v1/moves/:id', { config: routeConfig('admin'), schema: get }, (request) => getMove(ctx, request));
};
