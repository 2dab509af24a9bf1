/**
 * Goal: a tenant's quotas reach its cell and its usage comes back
 * (docs/decisions/0020-tenant-quotas-and-rate-limits.md): sent on creation
 * and on PATCH, sent again by the ownership reconciler where the cell
 * reports other values (a push that failed, a move that landed without
 * them), and `usage` in GET /v1/tenants[/{ns}] is what the cell reported,
 * absent when the cell does not answer.
 * Method: the in-process harness (a real one-member meta group under the
 * real app; every response checked against the contract) with its fake cell
 * directory, which records each quota push and reports what it holds; the
 * reconciler's pass is run directly.
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ownershipReconciler } from '../src/index.js';
import { call, startHarness, type Harness } from './support/harness.js';

const logger = pino({ level: 'silent' });

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h.close());

function reconciler(sent: string[] = []) {
  return ownershipReconciler({ meta: h.group, cells: h.cells, logger, quotasSent: (c) => sent.push(c) });
}

describe('tenant quotas on the cells', () => {
  it('sends the quotas on creation and on PATCH; an unchanged tenant is not sent again', async () => {
    const created = await call(h.app, 'POST', '/v1/tenants', { namespace: 'pay', cell: 'cell-1', quotas: { maxSessions: 2 } });
    expect(created.statusCode).toBe(201);
    expect(h.cells.quotas.get('cell-1/pay')).toEqual({ maxSessions: 2, maxLocks: 0, maxWaiters: 0 });
    const patched = await call(h.app, 'PATCH', '/v1/tenants/pay', { quotas: { maxSessions: 5, maxWaiters: 7, acquiresPerSecond: 10 } });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ quotas: { maxSessions: 5, maxWaiters: 7, acquiresPerSecond: 10 } });
    expect(h.cells.quotas.get('cell-1/pay')).toEqual({ maxSessions: 5, maxLocks: 0, maxWaiters: 7 });
    const sent: string[] = [];
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual([]);
  });

  it('a PATCH the cell did not take still answers 200, and the reconciler sends it once the cell answers', async () => {
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'pay', cell: 'cell-1', quotas: { maxSessions: 2 } });
    h.cells.down.add('cell-1');
    const patched = await call(h.app, 'PATCH', '/v1/tenants/pay', { quotas: { maxSessions: 9 } });
    expect(patched.statusCode).toBe(200);
    expect(h.cells.quotas.get('cell-1/pay')).toMatchObject({ maxSessions: 2 });
    const sent: string[] = [];
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual([]);
    h.cells.down.delete('cell-1');
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual(['cell-1']);
    expect(h.cells.quotas.get('cell-1/pay')).toMatchObject({ maxSessions: 9 });
  });

  it('a namespace whose cell lost its quotas (moved or re-claimed) gets them again; a frozen one waits', async () => {
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'pay', cell: 'cell-1', quotas: { maxLocks: 3 } });
    h.cells.quotas.delete('cell-1/pay');
    h.cells.frozen.add('cell-1/pay');
    const sent: string[] = [];
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual([]);
    h.cells.frozen.delete('cell-1/pay');
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual(['cell-1']);
    expect(h.cells.quotas.get('cell-1/pay')).toEqual({ maxSessions: 0, maxLocks: 3, maxWaiters: 0 });
  });

  it('fills usage from the cell, and leaves it out when the cell does not answer', async () => {
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'pay', cell: 'cell-1' });
    await call(h.app, 'POST', '/v1/tenants', { namespace: 'ops', cell: 'cell-2' });
    h.cells.owned.get('cell-1')!.set('pay', 3);
    const one = await call(h.app, 'GET', '/v1/tenants/pay');
    expect(one.statusCode).toBe(200);
    expect(one.json()).toMatchObject({ usage: { sessions: 3, locks: 6, waiters: 3 } });
    h.cells.down.add('cell-2');
    const all = await call(h.app, 'GET', '/v1/tenants');
    expect(all.statusCode).toBe(200);
    const byName = new Map((all.json().tenants as { namespace: string; usage?: unknown }[]).map((t) => [t.namespace, t]));
    expect(byName.get('pay')).toMatchObject({ usage: { sessions: 3, locks: 6, waiters: 3 } });
    expect(byName.get('ops')).not.toHaveProperty('usage');
  });
});
