/**
 * Goal: the read helpers behind the linearizable reads (GetLock, CheckToken,
 * ListLocks) and the leader's trackers (sessions, waiters, delayed locks)
 * report the state exactly; ListLocks pages in name order without gaps or
 * repeats.
 * Method: build a state through the harness, then compare the helpers'
 * answers with what was built, including a fast-check paging property.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RequestId } from '@fencer/base';
import { Cell } from '../test/harness.js';
import { NO_CREDENTIALS, NO_QUOTAS, type ListLocksPage } from './index.js';

describe('getLock and checkToken', () => {
  it('report holders, waiters, mode and the latest token', () => {
    const cell = new Cell();
    const [a, b, c] = [cell.open('payments', 'alpha'), cell.open('payments', 'beta'), cell.open()];
    const x = '/ls/payments/x';
    const ta = cell.grant(a, x, { mode: 'SHARED', lockDelayMs: 10 });
    const tb = cell.grant(b, x, { mode: 'SHARED' });
    cell.acquire(c, x, { requestId: 'rc', waitMs: 1234 });
    expect(cell.fsm.getLock(x)).toEqual({
      name: x,
      mode: 'SHARED',
      holders: [
        { sessionId: a, clientId: 'alpha', mode: 'SHARED', token: ta, lockDelayMs: 10 },
        { sessionId: b, clientId: 'beta', mode: 'SHARED', token: tb, lockDelayMs: 0 },
      ],
      waiters: [
        { sessionId: c, clientId: 'worker', mode: 'EXCLUSIVE', requestId: 'rc', waitMs: 1234, lockDelayMs: 0, queuedRevision: cell.index },
      ],
      delayed: false,
    });
    expect(cell.fsm.checkToken(x, ta)).toEqual({ current: true, latestToken: tb });
    expect(cell.fsm.checkToken(x, tb + 1)).toEqual({ current: false, latestToken: tb });
    expect(cell.fsm.checkToken('/ls/payments/free', 5)).toEqual({ current: false, latestToken: 0 });
    expect(cell.fsm.getLock('not a name')).toMatchObject({ holders: [], waiters: [] });
  });
});

describe('leader-side iteration', () => {
  it('sessions(), getSession(), locksOf(), waiters() and delayedLocks() report the live state', () => {
    const cell = new Cell();
    const [a, b] = [cell.open('payments', 'w', 3000), cell.open('payments', 'w', 9000)];
    cell.grant(a, '/ls/payments/x', { lockDelayMs: 500 });
    cell.acquire(b, '/ls/payments/x', { requestId: 'wait', waitMs: 42 });
    cell.grant(b, '/ls/payments/y');
    expect([...cell.fsm.sessions()]).toEqual([
      { sessionId: a, clientId: 'w', namespace: 'payments', ttlMs: 3000, openedRevision: 1, heldCount: 1, waitingCount: 0 },
      { sessionId: b, clientId: 'w', namespace: 'payments', ttlMs: 9000, openedRevision: 2, heldCount: 1, waitingCount: 1 },
    ]);
    expect(cell.fsm.getSession(b)?.ttlMs).toBe(9000);
    expect(cell.fsm.getSession('payments:none')).toBeUndefined();
    expect(cell.fsm.locksOf(b)).toEqual({ held: ['/ls/payments/y'], waiting: ['/ls/payments/x'] });
    expect([...cell.fsm.waiters()]).toEqual([
      { sessionId: b, name: '/ls/payments/x', requestId: RequestId('wait'), waitMs: 42, queuedRevision: 4 },
    ]);
    expect([...cell.fsm.delayedLocks()]).toEqual([]);
    const exp = cell.expire(a);
    expect([...cell.fsm.delayedLocks()]).toEqual([{ name: '/ls/payments/x', delayMs: 500, delayRevision: exp.revision }]);
    expect(cell.fsm.namespaces()).toEqual([
      {
        namespace: 'payments',
        state: 'active',
        lastRevision: exp.revision,
        sessions: 1,
        locks: 2,
        waiters: 1,
        quotas: NO_QUOTAS,
        credentials: NO_CREDENTIALS,
      },
    ]);
  });
});

describe('listLocks', () => {
  it('pages in name order, within the prefix, with an opaque token', () => {
    const cell = new Cell();
    const a = cell.open();
    cell.open('billing');
    const names = ['/ls/payments/b', '/ls/payments/a/2', '/ls/payments/a/1', '/ls/payments/c', '/ls/payments/ab'];
    for (const n of names) cell.grant(a, n);
    const first = cell.fsm.listLocks('/ls/payments/', 2) as ListLocksPage;
    expect(first.locks.map((l) => l.name)).toEqual(['/ls/payments/a/1', '/ls/payments/a/2']);
    const second = cell.fsm.listLocks('/ls/payments/', 2, first.nextPageToken) as ListLocksPage;
    expect(second.locks.map((l) => l.name)).toEqual(['/ls/payments/ab', '/ls/payments/b']);
    const third = cell.fsm.listLocks('/ls/payments/', 2, second.nextPageToken) as ListLocksPage;
    expect(third.locks.map((l) => l.name)).toEqual(['/ls/payments/c']);
    expect(third.nextPageToken).toBe('');
    expect((cell.fsm.listLocks('/ls/payments/a/') as ListLocksPage).locks.map((l) => l.name)).toEqual([
      '/ls/payments/a/1',
      '/ls/payments/a/2',
    ]);
    expect((cell.fsm.listLocks('/ls/payments/a') as ListLocksPage).locks).toHaveLength(3);
    expect(cell.fsm.listLocks('/ls/billing/')).toEqual({ ok: true, locks: [], nextPageToken: '' });
    expect(cell.fsm.listLocks('/ls/nowhere/')).toEqual({ ok: true, locks: [], nextPageToken: '' });
    expect(cell.fsm.listLocks('/ls/')).toMatchObject({ ok: false, code: 'INVALID_NAME' });
    expect(cell.fsm.listLocks('/ls/payments/', -1)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
  });

  it('walking all pages yields every live lock under the prefix once, sorted', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.stringMatching(/^[a-c]{1,3}(\/[a-c]{1,2})?$/), { minLength: 0, maxLength: 30 }),
        fc.integer({ min: 1, max: 7 }),
        (rests, pageSize) => {
          const cell = new Cell({ autoClaim: true, limits: { locksPerSessionMax: 100 } });
          const a = cell.open();
          for (const r of rests) cell.grant(a, `/ls/payments/${r}`);
          const seen: string[] = [];
          let token = '';
          for (let pages = 0; pages <= rests.length + 1; pages++) {
            const page = cell.fsm.listLocks('/ls/payments/', pageSize, token) as ListLocksPage;
            expect(page.locks.length).toBeLessThanOrEqual(pageSize);
            seen.push(...page.locks.map((l) => l.name));
            token = page.nextPageToken;
            if (token === '') break;
          }
          expect(token).toBe('');
          expect(seen).toEqual(rests.map((r) => `/ls/payments/${r}`).sort());
        },
      ),
      { numRuns: 200 },
    );
  });
});
