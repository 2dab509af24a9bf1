/**
 * Goal: every path and every error code of the control-plane contract
 * (openapi/openapi.yaml) behaves as the contract says, and every response
 * the app gives validates against the contract.
 * Method: the real app on a real one-member meta group (WAL in a temporary
 * directory) with a fake cell directory, driven through fastify's inject();
 * each response goes through checkContract (ajv with the contract's own
 * schemas). The last test asserts that every operation answered a success
 * and every code of the contract's list was seen.
 */
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeId } from '@fencer/base';
import { buildApp, openapi, openapiPath, type MetaStore } from '../src/index.js';
import { call, checkContract, seen, startHarness, type Harness } from './support/harness.js';

const ADMIN = 'admin-secret-token';
const admin = { authorization: `Bearer ${ADMIN}` };

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ adminToken: ADMIN, cells: ['cell-1', 'cell-2'], limits: { tenantsMax: 8 } });
});
afterAll(async () => {
  await h?.close();
});

describe('the contract document', () => {
  it('GET /v1/openapi.json serves the contract copy as JSON', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(openapi);
    expect(res.json().paths['/v1/tenants']).toBeDefined();
  });

  const shared = [process.env['FENCER_SHARED_DIR'], path.resolve(openapiPath, '../../../../../shared')]
    .filter((d): d is string => !!d)
    .map((d) => path.join(d, 'contract/control-plane/v1/openapi.yaml'))
    .find((f) => existsSync(f));
  // The shared contract sits beside the repository in CI and in a developer's checkout; a bare clone elsewhere has none.
  if (shared !== undefined || process.env['CI'] === 'true') {
    it('the copy is byte-identical to the shared contract', () => {
      expect(shared, 'shared/contract/control-plane/v1/openapi.yaml beside the repository (or FENCER_SHARED_DIR)').toBeDefined();
      expect(readFileSync(openapiPath)).toEqual(readFileSync(shared!));
    });
  }
});

describe('auth', () => {
  it('refuses a call without a token (401 UNAUTHENTICATED) and with an unknown token', async () => {
    expect((await call(h.app, 'GET', '/v1/tenants')).json().code).toBe('UNAUTHENTICATED');
    expect((await call(h.app, 'GET', '/v1/tenants', undefined, { authorization: 'Bearer nope' })).json().code).toBe('UNAUTHENTICATED');
    expect((await call(h.app, 'GET', '/v1/tenants', undefined, { authorization: 'Basic abc' })).statusCode).toBe(401);
  });

  it('a tenant token reads its own tenant, rotates its own token, and nothing else (403 FORBIDDEN)', async () => {
    const created = await call(h.app, 'POST', '/v1/tenants', { namespace: 'authns', cell: 'cell-1' }, admin);
    expect(created.statusCode).toBe(201);
    const token = created.json().token as string;
    expect(token).toMatch(/^fencer_tenant_/);
    const mine = { authorization: `Bearer ${token}` };
    expect((await call(h.app, 'GET', '/v1/tenants/authns', undefined, mine)).statusCode).toBe(200);
    expect((await call(h.app, 'GET', '/v1/cells/cell-1/snapshots', undefined, mine)).statusCode).toBe(200);
    expect((await call(h.app, 'GET', '/v1/tenants', undefined, mine)).json().code).toBe('FORBIDDEN');
    expect((await call(h.app, 'GET', '/v1/fleet', undefined, mine)).json().code).toBe('FORBIDDEN');
    expect((await call(h.app, 'GET', '/v1/cells/cell-2/snapshots', undefined, mine)).json().code).toBe('FORBIDDEN');
    expect((await call(h.app, 'DELETE', '/v1/tenants/authns', undefined, mine)).json().code).toBe('FORBIDDEN');
    // Rotation: the new token works, the old one stops at once (graceMs 0).
    const rotated = await call(h.app, 'POST', '/v1/tenants/authns/token', { graceMs: 0 }, mine);
    expect(rotated.statusCode).toBe(200);
    const next = { authorization: `Bearer ${rotated.json().token}` };
    expect((await call(h.app, 'GET', '/v1/tenants/authns', undefined, next)).statusCode).toBe(200);
    expect((await call(h.app, 'GET', '/v1/tenants/authns', undefined, mine)).json().code).toBe('UNAUTHENTICATED');
    // With a grace period, the previous token keeps working.
    const graced = await call(h.app, 'POST', '/v1/tenants/authns/token', { graceMs: 60_000 }, next);
    expect((await call(h.app, 'GET', '/v1/tenants/authns', undefined, next)).statusCode).toBe(200);
    expect((await call(h.app, 'GET', '/v1/tenants/authns', undefined, { authorization: `Bearer ${graced.json().token}` })).statusCode).toBe(
      200,
    );
    // Only hashes are stored.
    const stored = JSON.stringify(h.group.state.tenant('authns'));
    expect(stored).not.toContain(token);
    expect(stored).toContain('sha256:');
  });

  it('health and the contract need no token', async () => {
    expect((await call(h.app, 'GET', '/v1/health')).statusCode).toBe(200);
  });
});

describe('tenants', () => {
  it('creates, reads, lists, changes quotas and deletes a tenant; the cell claims and drops its namespace', async () => {
    const res = await call(
      h.app,
      'POST',
      '/v1/tenants',
      { namespace: 'payments', cell: 'cell-2', owner: 'team-pay', quotas: { maxSessions: 10 } },
      admin,
    );
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      namespace: 'payments',
      cell: 'cell-2',
      owner: 'team-pay',
      quotas: { maxSessions: 10 },
      moving: false,
    });
    expect(h.cells.owned.get('cell-2')?.has('payments')).toBe(true);
    expect((await call(h.app, 'GET', '/v1/tenants/payments', undefined, admin)).json().cell).toBe('cell-2');
    const list = await call(h.app, 'GET', '/v1/tenants', undefined, admin);
    expect(list.json().tenants.map((t: { namespace: string }) => t.namespace)).toContain('payments');
    const patched = await call(h.app, 'PATCH', '/v1/tenants/payments', { quotas: { maxLocks: 7 } }, admin);
    expect(patched.json().quotas).toEqual({ maxSessions: 10, maxLocks: 7 });
    // A live session refuses the delete unless forced.
    h.cells.owned.get('cell-2')!.set('payments', 2);
    expect((await call(h.app, 'DELETE', '/v1/tenants/payments', undefined, admin)).json().code).toBe('TENANT_NOT_EMPTY');
    expect((await call(h.app, 'DELETE', '/v1/tenants/payments?force=true', undefined, admin)).statusCode).toBe(204);
    expect(h.cells.owned.get('cell-2')?.has('payments')).toBe(false);
    expect((await call(h.app, 'GET', '/v1/tenants/payments', undefined, admin)).json().code).toBe('TENANT_NOT_FOUND');
    expect((await call(h.app, 'PATCH', '/v1/tenants/payments', { quotas: {} }, admin)).json().code).toBe('TENANT_NOT_FOUND');
    expect((await call(h.app, 'DELETE', '/v1/tenants/payments', undefined, admin)).json().code).toBe('TENANT_NOT_FOUND');
  });

  it('replays a delete done under the same Idempotency-Key (204 again), while a plain second delete is 404', async () => {
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'gone', cell: 'cell-1' }, admin);
    const key = { ...admin, 'idempotency-key': 'delete-gone' };
    expect((await call(h.app, 'DELETE', '/v1/tenants/gone', undefined, key)).statusCode).toBe(204);
    expect((await call(h.app, 'DELETE', '/v1/tenants/gone', undefined, key)).statusCode).toBe(204);
    expect((await call(h.app, 'DELETE', '/v1/tenants/gone', undefined, admin)).json().code).toBe('TENANT_NOT_FOUND');
  });

  it('places a tenant without a cell on the cell with the fewest live sessions', async () => {
    h.cells.sessions.set('cell-1', 50);
    h.cells.sessions.set('cell-2', 3);
    expect((await call(h.app, 'POST', '/v1/tenants', { namespace: 'placed' }, admin)).json().cell).toBe('cell-2');
    h.cells.sessions.clear();
  });

  it('answers TENANT_EXISTS, CELL_NOT_FOUND and INVALID_REQUEST', async () => {
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'dup', cell: 'cell-1' }, admin);
    const again = await call(h.app, 'POST', '/v1/tenants', { namespace: 'dup', cell: 'cell-2' }, admin);
    expect([again.statusCode, again.json().code]).toEqual([409, 'TENANT_EXISTS']);
    expect((await call(h.app, 'POST', '/v1/tenants', { namespace: 'nocell', cell: 'cell-9' }, admin)).json().code).toBe('CELL_NOT_FOUND');
    for (const body of [
      {},
      { namespace: '-bad' },
      { namespace: 'ok', extra: 1 },
      { namespace: 5 },
      { namespace: 'ok', quotas: { maxLocks: 0 } },
    ]) {
      const r = await call(h.app, 'POST', '/v1/tenants', body, admin);
      expect([r.statusCode, r.json().code], JSON.stringify(body)).toEqual([400, 'INVALID_REQUEST']);
    }
    expect((await call(h.app, 'GET', '/v1/tenants/bad%20name', undefined, admin)).json().code).toBe('INVALID_REQUEST');
  });

  it('honours Idempotency-Key: the same request gets the first answer, another request 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const key = { ...admin, 'idempotency-key': 'create-idem-1' };
    const first = await call(h.app, 'POST', '/v1/tenants', { namespace: 'idem', cell: 'cell-1' }, key);
    const second = await call(h.app, 'POST', '/v1/tenants', { namespace: 'idem', cell: 'cell-1' }, key);
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.json().createdAt).toBe(first.json().createdAt);
    expect(second.json().token).toBeUndefined();
    const other = await call(h.app, 'POST', '/v1/tenants', { namespace: 'idem2', cell: 'cell-1' }, key);
    expect([other.statusCode, other.json().code]).toEqual([409, 'IDEMPOTENCY_KEY_REUSED']);
    const tooLong = await call(h.app, 'POST', '/v1/tenants', { namespace: 'idem3' }, { ...admin, 'idempotency-key': 'k'.repeat(129) });
    expect(tooLong.json().code).toBe('INVALID_REQUEST');
  });

  it('answers CELL_UNAVAILABLE when the cell cannot claim, and a retry with the same key completes the claim', async () => {
    h.cells.unavailable = true;
    const key = { ...admin, 'idempotency-key': 'claim-retry' };
    const failed = await call(h.app, 'POST', '/v1/tenants', { namespace: 'flaky', cell: 'cell-1' }, key);
    expect([failed.statusCode, failed.json().code]).toEqual([503, 'CELL_UNAVAILABLE']);
    h.cells.unavailable = false;
    expect((await call(h.app, 'POST', '/v1/tenants', { namespace: 'flaky', cell: 'cell-1' }, key)).statusCode).toBe(201);
    expect(h.cells.owned.get('cell-1')?.has('flaky')).toBe(true);
  });

  it('answers QUOTA_EXCEEDED when the fleet holds its maximum of tenants', async () => {
    const codes: number[] = [];
    for (let i = 0; i < 9; i++)
      codes.push((await call(h.app, 'POST', '/v1/tenants', { namespace: `fill-${i}`, cell: 'cell-1' }, admin)).statusCode);
    expect(codes.filter((c) => c === 201).length).toBe(8 - 5);
    expect(codes.slice(3)).toEqual([429, 429, 429, 429, 429, 429]);
    expect((await call(h.app, 'POST', '/v1/tenants', { namespace: 'fill-x', cell: 'cell-1' }, admin)).json().code).toBe('QUOTA_EXCEEDED');
    for (let i = 0; i < 3; i++)
      expect((await call(h.app, 'DELETE', `/v1/tenants/fill-${i}?force=true`, undefined, admin)).statusCode).toBe(204);
  });
});

describe('routing and fleet', () => {
  it('GET /v1/routing gives the table, and a long poll answers the moment the version passes sinceVersion', async () => {
    const before = (await call(h.app, 'GET', '/v1/routing', undefined, admin)).json();
    expect(before.routes.length).toBeGreaterThan(0);
    const poll = h.app.inject({ method: 'GET', url: `/v1/routing?sinceVersion=${before.version}&waitMs=30000`, headers: admin });
    let answered = false;
    void poll.then(() => (answered = true));
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'routed', cell: 'cell-1' }, admin);
    const res = await poll;
    checkContract('GET', '/v1/routing', res);
    expect(res.json().version).toBeGreaterThan(before.version);
    expect(res.json().routes).toContainEqual({ namespace: 'routed', cell: 'cell-1', state: 'active' });
  });

  it('closing the app answers a parked long poll at once with the table as it is, not after its waitMs', async () => {
    const own = await startHarness({ adminToken: ADMIN });
    try {
      const now = (await call(own.app, 'GET', '/v1/routing', undefined, admin)).json();
      const poll = own.app.inject({ method: 'GET', url: `/v1/routing?sinceVersion=${now.version}&waitMs=60000`, headers: admin });
      let answered = false;
      void poll.then(() => (answered = true));
      await new Promise((r) => setImmediate(r));
      expect(answered).toBe(false);
      await own.app.close();
      const res = await poll;
      expect(res.statusCode).toBe(200);
      expect(res.json().version).toBe(now.version);
    } finally {
      await own.close();
    }
  }, 15_000);

  it('a long poll with nothing new answers after waitMs with the current table', async () => {
    const now = (await call(h.app, 'GET', '/v1/routing', undefined, admin)).json();
    const res = await call(h.app, 'GET', `/v1/routing?sinceVersion=${now.version}&waitMs=50`, undefined, admin);
    expect(res.json().version).toBe(now.version);
    expect((await call(h.app, 'GET', '/v1/routing?waitMs=60001', undefined, admin)).json().code).toBe('INVALID_REQUEST');
    expect((await call(h.app, 'GET', '/v1/routing?sinceVersion=-1', undefined, admin)).json().code).toBe('INVALID_REQUEST');
  });

  it('GET /v1/fleet lists each cell with its namespaces and replicas, unreachable ones with lastSeenMs', async () => {
    const fleet = (await call(h.app, 'GET', '/v1/fleet', undefined, admin)).json();
    const cell1 = fleet.cells.find((c: { id: string }) => c.id === 'cell-1');
    expect(cell1.namespaces).toContain('routed');
    expect(cell1.replicas).toContainEqual({ id: 'cell-1-r2', grpc: '127.0.0.1:7101', role: 'unreachable', lastSeenMs: 4000 });
    expect(fleet.routingVersion).toBe(h.group.state.routingVersion);
  });
});

describe('moves and snapshots (records)', () => {
  it('starts a move (202 queued), lists and gets it; MOVE_IN_PROGRESS, ALREADY_THERE, TENANT_NOT_FOUND, CELL_NOT_FOUND, NOT_FOUND', async () => {
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'mover', cell: 'cell-1' }, admin);
    const started = await call(h.app, 'POST', '/v1/moves', { namespace: 'mover', toCell: 'cell-2' }, admin);
    expect(started.statusCode).toBe(202);
    expect(started.json()).toMatchObject({ namespace: 'mover', fromCell: 'cell-1', toCell: 'cell-2', state: 'queued' });
    const id = started.json().id as string;
    expect((await call(h.app, 'GET', `/v1/moves/${id}`, undefined, admin)).json().id).toBe(id);
    expect((await call(h.app, 'GET', '/v1/moves', undefined, admin)).json().moves.map((m: { id: string }) => m.id)).toContain(id);
    expect((await call(h.app, 'GET', '/v1/tenants/mover', undefined, admin)).json().moving).toBe(true);
    expect((await call(h.app, 'POST', '/v1/moves', { namespace: 'mover', toCell: 'cell-2' }, admin)).json().code).toBe('MOVE_IN_PROGRESS');
    expect((await call(h.app, 'DELETE', '/v1/tenants/mover', undefined, admin)).json().code).toBe('MOVE_IN_PROGRESS');
    expect((await call(h.app, 'POST', '/v1/moves', { namespace: 'routed', toCell: 'cell-1' }, admin)).json().code).toBe('ALREADY_THERE');
    expect((await call(h.app, 'POST', '/v1/moves', { namespace: 'ghost', toCell: 'cell-1' }, admin)).json().code).toBe('TENANT_NOT_FOUND');
    expect((await call(h.app, 'POST', '/v1/moves', { namespace: 'routed', toCell: 'cell-9' }, admin)).json().code).toBe('CELL_NOT_FOUND');
    expect((await call(h.app, 'POST', '/v1/moves', { namespace: 'routed' }, admin)).json().code).toBe('INVALID_REQUEST');
    expect((await call(h.app, 'GET', '/v1/moves/nope', undefined, admin)).statusCode).toBe(404);
  });

  it('records a snapshot request (202 uploading), lists newest first and gets it; CELL_NOT_FOUND and 404', async () => {
    const a = (await call(h.app, 'POST', '/v1/cells/cell-1/snapshots', undefined, admin)).json();
    const b = await call(h.app, 'POST', '/v1/cells/cell-1/snapshots', undefined, admin);
    expect(b.statusCode).toBe(202);
    expect(b.json()).toMatchObject({ cell: 'cell-1', state: 'uploading' });
    const list = (await call(h.app, 'GET', '/v1/cells/cell-1/snapshots', undefined, admin))
      .json()
      .snapshots.map((s: { id: string }) => s.id);
    expect(list.slice(0, 2)).toEqual([b.json().id, a.id]);
    expect((await call(h.app, 'GET', `/v1/cells/cell-1/snapshots/${a.id}`, undefined, admin)).json().id).toBe(a.id);
    expect((await call(h.app, 'GET', `/v1/cells/cell-2/snapshots/${a.id}`, undefined, admin)).statusCode).toBe(404);
    expect((await call(h.app, 'POST', '/v1/cells/cell-9/snapshots', undefined, admin)).json().code).toBe('CELL_NOT_FOUND');
    expect((await call(h.app, 'GET', '/v1/cells/cell-9/snapshots', undefined, admin)).json().code).toBe('CELL_NOT_FOUND');
  });
});

describe('an instance without a reachable leader', () => {
  it('answers 503 NOT_LEADER for writes and reads, and its health is 503', async () => {
    const headless: MetaStore = {
      write: async () => Promise.reject(new Error('unreachable')),
      read: async () => Promise.reject(new Error('unreachable')),
      state: h.group.state,
      isLeader: false,
      leader: null,
      leaderAddress: () => undefined,
      waitRouting: () => () => {},
      appliedIndex: 0,
      waitApplied: () => () => {},
    };
    const app = await buildApp({ meta: headless, cells: h.cells });
    try {
      for (const [method, url] of [
        ['GET', '/v1/tenants'],
        ['POST', '/v1/moves'],
        ['GET', '/v1/health'],
      ] as const) {
        const res = await call(app, method, url, method === 'POST' ? { namespace: 'x', toCell: 'y' } : undefined);
        expect([res.statusCode, res.json().code]).toEqual([503, 'NOT_LEADER']);
      }
    } finally {
      await app.close();
    }
  });

  it('a follower whose leader does not answer says NOT_LEADER, never 500', async () => {
    const follower: MetaStore = {
      write: h.group.write.bind(h.group),
      read: h.group.read.bind(h.group),
      waitRouting: h.group.waitRouting.bind(h.group),
      appliedIndex: 0,
      waitApplied: h.group.waitApplied.bind(h.group),
      state: h.group.state,
      isLeader: false,
      leader: NodeId('cp1'),
      leaderAddress: () => 'http://127.0.0.1:1',
    };
    const app = await buildApp({ meta: follower, cells: h.cells });
    try {
      const res = await call(app, 'GET', '/v1/tenants');
      expect([res.statusCode, res.json().code]).toEqual([503, 'NOT_LEADER']);
    } finally {
      await app.close();
    }
  });
});

describe('coverage of the contract', () => {
  it('unknown paths and methods are 404 problem documents', async () => {
    expect((await call(h.app, 'GET', '/v2/nothing')).json().code).toBe('NOT_FOUND');
    expect((await call(h.app, 'PUT', '/v1/tenants', {}, admin)).statusCode).toBe(404);
  });

  it('every operation answered a success and every code of the contract was seen', () => {
    const operations = Object.entries(openapi.paths).flatMap(([p, ops]) =>
      Object.keys(ops)
        .filter((m) => m !== 'parameters')
        .map((m) => `${m.toUpperCase()} ${p}`),
    );
    expect(operations.filter((o) => !seen.operations.has(o) && o !== 'GET /v1/openapi.json')).toEqual([]);
    const description = (openapi.components.schemas['Problem'] as { properties: { code: { description: string } } }).properties.code
      .description;
    const codes = [...description.matchAll(/[A-Z][A-Z_]{3,}/g)].map((m) => m[0]);
    expect(codes.length).toBe(12);
    expect(codes.filter((c) => !seen.codes.has(c))).toEqual([]);
  });
});
