/**
 * Goal: a meta-group follower serves GET /v1/routing (plain and long poll)
 * and GET /v1/fleet from its own state after a read barrier through its
 * leader, so the leader sees only the barrier; a write that completed
 * before the read is in the answer; auth is still checked; and with no
 * leader to confirm the read, the follower answers 503 NOT_LEADER. The
 * dashboard's reads on a follower ask the same one read index.
 * Method: a real one-member meta group (support/harness.ts) served by two
 * apps on 127.0.0.1: the leader's app, which counts the paths it is asked,
 * and a follower's app over a MetaStore that shares the group's state and
 * applied index but is not leader and names the leader app's URL. Requests
 * go to the follower through inject().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { NodeId } from '@fencer/base';
import { buildApp, type MetaStore } from '../src/index.js';
import { readAnywhere } from '../src/dashboard/read-anywhere.js';
import { call, startHarness, type Harness } from './support/harness.js';

const ADMIN = 'admin-secret-token';
const admin = { authorization: `Bearer ${ADMIN}` };
const READ_INDEX = '/v1/internal/read-index';

let h: Harness;
let leaderApp: FastifyInstance;
let follower: FastifyInstance;
const asked: string[] = [];

function followerOf(leaderUrl: string): MetaStore {
  const g = h.group;
  return {
    write: g.write.bind(g),
    read: () => Promise.reject(new Error('a follower has no ReadIndex of its own')),
    waitRouting: g.waitRouting.bind(g),
    waitApplied: g.waitApplied.bind(g),
    get state() {
      return g.state;
    },
    get appliedIndex() {
      return g.appliedIndex;
    },
    isLeader: false,
    leader: NodeId('cp1'),
    leaderAddress: () => leaderUrl,
  };
}

beforeAll(async () => {
  h = await startHarness({ adminToken: ADMIN, cells: ['cell-1', 'cell-2'] });
  leaderApp = await buildApp({ meta: h.group, cells: h.cells, adminToken: ADMIN });
  leaderApp.addHook('onRequest', async (request) => void asked.push(request.url.split('?')[0]!));
  const url = await leaderApp.listen({ host: '127.0.0.1', port: 0 });
  follower = await buildApp({ meta: followerOf(url), cells: h.cells, adminToken: ADMIN });
});
afterAll(async () => {
  await follower?.close();
  await leaderApp?.close();
  await h?.close();
});

describe('reads on a meta-group follower', () => {
  it("the dashboard's reads on a follower pass the same barrier: the leader's one read index, asked with the admin token", async () => {
    const created = await call(leaderApp, 'POST', '/v1/tenants', { namespace: 'fr-dash', cell: 'cell-1' }, admin);
    expect(created.statusCode).toBe(201);
    const url = `http://127.0.0.1:${(leaderApp.server.address() as { port: number }).port}`;
    asked.length = 0;
    const state = await readAnywhere(followerOf(url), ADMIN);
    expect(asked).toEqual([READ_INDEX]);
    expect(state.appliedIndex).toBeGreaterThanOrEqual(h.group.appliedIndex);
    await expect(readAnywhere(followerOf(url), 'not-the-admin-token')).rejects.toMatchObject({ code: 'NOT_LEADER' });
  });

  it('serves GET /v1/routing itself after a barrier, with a write done just before', async () => {
    const created = await call(leaderApp, 'POST', '/v1/tenants', { namespace: 'fr-one', cell: 'cell-1' }, admin);
    expect(created.statusCode).toBe(201);
    asked.length = 0;
    const res = await call(follower, 'GET', '/v1/routing', undefined, admin);
    expect(res.statusCode).toBe(200);
    expect(res.json().routes.map((r: { namespace: string }) => r.namespace)).toContain('fr-one');
    expect(res.json()).toEqual((await call(leaderApp, 'GET', '/v1/routing', undefined, admin)).json());
    expect(asked).toEqual([READ_INDEX, '/v1/routing']);
  });

  it('parks a long poll itself and answers it when a write through the leader changes the table', async () => {
    const before = (await call(follower, 'GET', '/v1/routing', undefined, admin)).json().version as number;
    asked.length = 0;
    const poll = call(follower, 'GET', `/v1/routing?sinceVersion=${before}&waitMs=20000`, undefined, admin);
    // Written through the follower: forwarded to the leader, as every write is.
    const created = await call(follower, 'POST', '/v1/tenants', { namespace: 'fr-two', cell: 'cell-2' }, admin);
    expect(created.statusCode).toBe(201);
    const answered = await poll;
    expect(answered.statusCode).toBe(200);
    expect(answered.json().version).toBeGreaterThan(before);
    expect(answered.json().routes.map((r: { namespace: string }) => r.namespace)).toContain('fr-two');
    expect(asked.filter((p) => p !== READ_INDEX)).toEqual(['/v1/tenants']);
  });

  it('serves GET /v1/fleet itself', async () => {
    asked.length = 0;
    const res = await call(follower, 'GET', '/v1/fleet', undefined, admin);
    expect(res.statusCode).toBe(200);
    expect(res.json().cells.map((c: { id: string }) => c.id)).toEqual(['cell-1', 'cell-2']);
    expect(asked).toEqual([READ_INDEX]);
  });

  it('still checks the token (401 without one)', async () => {
    const res = await call(follower, 'GET', '/v1/routing');
    expect([res.statusCode, res.json().code]).toEqual([401, 'UNAUTHENTICATED']);
  });

  it('answers 503 NOT_LEADER when no leader confirms the read', async () => {
    const orphan = await buildApp({ meta: followerOf('http://127.0.0.1:1'), cells: h.cells, adminToken: ADMIN });
    try {
      for (const url of ['/v1/routing', '/v1/fleet']) {
        const res = await call(orphan, 'GET', url, undefined, admin);
        expect([res.statusCode, res.json().code]).toEqual([503, 'NOT_LEADER']);
      }
    } finally {
      await orphan.close();
    }
  });

  it('the read-index route answers NOT_LEADER on a follower', async () => {
    const res = await call(follower, 'GET', READ_INDEX, undefined, admin);
    expect([res.statusCode, res.json().code]).toEqual([503, 'NOT_LEADER']);
  });
});
