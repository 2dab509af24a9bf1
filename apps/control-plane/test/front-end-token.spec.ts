/**
 * Goal: routers and proxies hold a narrower credential than the admin token
 * (decision 0016): the front-end token reads the routing table and fleet
 * status and creates tenants (auto-tenants), and every admin write or read
 * beyond that answers 403 FORBIDDEN, saying the admin token is needed.
 * Method: the real app on a one-member meta group with a fake cell
 * directory (test/support/harness.ts), auth on with an admin token and a
 * front-end token, driven through inject().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startHarness, type Harness } from './support/harness.js';

const admin = { authorization: 'Bearer admin-secret-token' };
const frontEnd = { authorization: 'Bearer front-end-secret-token' };

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ adminToken: 'admin-secret-token', frontEndToken: 'front-end-secret-token', cells: ['cell-1', 'cell-2'] });
});
afterAll(async () => {
  await h?.close();
});

describe('the front-end token', () => {
  it('reads routing, fleet status and the tenant list (routers take acquire rates from it) and creates a tenant', async () => {
    expect((await call(h.app, 'GET', '/v1/routing', undefined, frontEnd)).statusCode).toBe(200);
    expect((await call(h.app, 'GET', '/v1/fleet', undefined, frontEnd)).statusCode).toBe(200);
    expect((await call(h.app, 'GET', '/v1/tenants', undefined, frontEnd)).statusCode).toBe(200);
    const created = await call(h.app, 'POST', '/v1/tenants', { namespace: 'auto1' }, frontEnd);
    expect(created.statusCode).toBe(201);
  });

  it('is refused for every admin write and admin read (403 FORBIDDEN, naming the admin token)', async () => {
    expect((await call(h.app, 'POST', '/v1/tenants', { namespace: 'victim', cell: 'cell-1' }, admin)).statusCode).toBe(201);
    const refused = [
      await call(h.app, 'GET', '/v1/tenants/victim', undefined, frontEnd),
      await call(h.app, 'PATCH', '/v1/tenants/victim', { quota: { maxSessions: 1 } }, frontEnd),
      await call(h.app, 'DELETE', '/v1/tenants/victim', undefined, frontEnd),
      await call(h.app, 'POST', '/v1/tenants/victim/token', { graceMs: 0 }, frontEnd),
      await call(h.app, 'POST', '/v1/moves', { namespace: 'victim', toCell: 'cell-2' }, frontEnd),
      await call(h.app, 'GET', '/v1/moves', undefined, frontEnd),
      await call(h.app, 'POST', '/v1/cells/cell-1/snapshots', undefined, frontEnd),
    ];
    for (const res of refused) {
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().code).toBe('FORBIDDEN');
      expect(res.json().detail ?? res.json().message ?? res.body).toMatch(/admin token/);
    }
    // The tenant it could not touch is still there, unrotated.
    expect((await call(h.app, 'GET', '/v1/tenants/victim', undefined, admin)).statusCode).toBe(200);
  });
});
