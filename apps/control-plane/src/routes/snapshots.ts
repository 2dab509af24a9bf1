/**
 * /v1/cells/{cell}/snapshots: the snapshot catalogue of each cell. POST
 * records a snapshot request and answers 202, and wakes the snapshot task
 * (workers/snapshot-task.ts), which uploads it and finishes the record; the
 * list is newest first.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { SnapshotRecord } from '@fencer/meta-fsm';
import { IDEMPOTENCY_HEADERS } from '../http/idempotency.js';
import { routeConfig } from '../http/route-config.js';
import { responseSchema } from '../openapi.js';
import { ProblemError } from '../problems.js';
import { snapshotJson } from '../resource-json.js';
import { SNAPSHOT_TASK } from '../workers/snapshot-task.js';
import { cellMustExist, type RouteContext } from './route-context.js';

async function listSnapshots(ctx: RouteContext, request: FastifyRequest): Promise<{ snapshots: Record<string, unknown>[] }> {
  const { cell } = request.params as { cell: string };
  cellMustExist(ctx.cells, cell);
  const state = await ctx.meta.read();
  return {
    snapshots: state
      .snapshotRecords()
      .filter((s) => s.cell === cell)
      .reverse()
      .map(snapshotJson),
  };
}

async function recordSnapshot(ctx: RouteContext, request: FastifyRequest, reply: FastifyReply): Promise<Record<string, unknown>> {
  const { cell } = request.params as { cell: string };
  cellMustExist(ctx.cells, cell);
  const applied = await ctx.write(request, { kind: 'RecordSnapshot', id: ctx.newId(), cell, atMs: ctx.wallMs() });
  ctx.wake(SNAPSHOT_TASK);
  reply.code(202);
  return snapshotJson((applied.outcome as { snapshot: SnapshotRecord }).snapshot);
}

async function getSnapshot(ctx: RouteContext, request: FastifyRequest): Promise<Record<string, unknown>> {
  const { cell, id } = request.params as { cell: string; id: string };
  cellMustExist(ctx.cells, cell);
  const snapshot = (await ctx.meta.read()).snapshotRecord(id);
  if (snapshot === undefined || snapshot.cell !== cell) throw new ProblemError('SNAPSHOT_NOT_FOUND', `no snapshot "${id}" of cell ${cell}`);
  return snapshotJson(snapshot);
}

const CELL_SNAPSHOTS = '/v1/cells/{cell}/snapshots';
const cellParams = { type: 'object', required: ['cell'], properties: { cell: { type: 'string' } } };

export const snapshotRoutes: FastifyPluginAsync<RouteContext> = async (app, ctx) => {
  const list = { params: cellParams, response: { 200: responseSchema(CELL_SNAPSHOTS, 'get', '200') } };
  app.get('/v1/cells/:cell/snapshots', { config: routeConfig('cell-reader'), schema: list }, (request) => listSnapshots(ctx, request));
  const record = { params: cellParams, headers: IDEMPOTENCY_HEADERS, response: { 202: responseSchema(CELL_SNAPSHOTS, 'post', '202') } };
  app.post('/v1/cells/:cell/snapshots', { config: routeConfig('admin'), schema: record }, (request, reply) =>
    recordSnapshot(ctx, request, reply),
  );
  const get = {
    params: { type: 'object', required: ['cell', 'id'], properties: { cell: { type: 'string' }, id: { type: 'string' } } },
    response: { 200: responseSchema(`${CELL_SNAPSHOTS}/{id}`, 'get', '200') },
  };
  app.get('/v1/cells/:cell/snapshots/:id', { config: routeConfig('admin'), schema: get }, (request) => getSnapshot(ctx, request));
};
