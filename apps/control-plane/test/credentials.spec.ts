/**
 * Goal: a tenant's token hashes reach its cell (docs/decisions/0016-tenant-credentials-and-mtls.md):
 * sent on creation and at once on rotation (the previous hash with its grace
 * expiry, or gone with no grace), and sent again by the ownership reconciler
 * where the cell reports others (a push that failed, a move that landed
 * without them); a frozen namespace waits; an unchanged one is not re-sent.
 * Method: the in-process harness (a real one-member meta group under the real
 * app, auth on) with its fake cell directory, which records each push and
 * reports what it holds; the reconciler's pass is run directly.
 */
import { createHash } from 'node:crypto';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ownershipReconciler } from '../src/index.js';
import { call, startHarness, type Harness } from './support/harness.js';

const logger = pino({ level: 'silent' });
const admin = { authorization: 'Bearer admin-secret-token' };
const hashOf = (token: string): string => `sha256:${createHash('sha256').update(token).digest('hex')}`;

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ adminToken: 'admin-secret-token', frontEndToken: 'front-end-secret-token' });
});
afterEach(async () => h.close());

function reconciler(sent: string[]) {
  return ownershipReconciler({ meta: h.group, cells: h.cells, logger, credentialsSent: (c) => sent.push(c) });
}

async function create(namespace: string): Promise<string> {
  const res = await call(h.app, 'POST', '/v1/tenants', { namespace, cell: 'cell-1' }, admin);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().token as string;
}

async function rotate(namespace: string, graceMs: number): Promise<string> {
  const res = await call(h.app, 'POST', `/v1/tenants/${namespace}/token`, { graceMs }, admin);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().token as string;
}

describe('tenant token hashes on the cells', () => {
  it('sends the hash on creation and the new list at once on rotation; the reconciler then has nothing to send', async () => {
    const first = await create('pay');
    expect(h.cells.credentials.get('cell-1/pay')).toEqual([{ hash: hashOf(first), validUntilMs: 0 }]);
    const second = await rotate('pay', 60_000);
    const held = h.cells.credentials.get('cell-1/pay')!;
    expect(held.map((c) => c.hash)).toEqual([hashOf(second), hashOf(first)]);
    expect(held[0]!.validUntilMs).toBe(0);
    expect(held[1]!.validUntilMs).toBeGreaterThan(Date.now() + 50_000);
    const third = await rotate('pay', 0);
    expect(h.cells.credentials.get('cell-1/pay')).toEqual([{ hash: hashOf(third), validUntilMs: 0 }]);
    const sent: string[] = [];
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual([]);
  });

  it('a rotation the cell did not take still answers, and the reconciler sends it once the cell answers; a frozen one waits', async () => {
    await create('pay');
    h.cells.down.add('cell-1');
    const rotated = await rotate('pay', 0);
    const sent: string[] = [];
    h.cells.down.delete('cell-1');
    h.cells.frozen.add('cell-1/pay');
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual([]);
    h.cells.frozen.delete('cell-1/pay');
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual(['cell-1']);
    expect(h.cells.credentials.get('cell-1/pay')).toEqual([{ hash: hashOf(rotated), validUntilMs: 0 }]);
  });

  it('a namespace whose cell lost its hashes (moved or re-claimed) gets them again', async () => {
    const token = await create('pay');
    h.cells.credentials.delete('cell-1/pay');
    const sent: string[] = [];
    await reconciler(sent).runPass(new AbortController().signal);
    expect(sent).toEqual(['cell-1']);
    expect(h.cells.credentials.get('cell-1/pay')).toEqual([{ hash: hashOf(token), validUntilMs: 0 }]);
  });
});
