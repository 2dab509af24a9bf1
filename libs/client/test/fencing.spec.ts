/**
 * Goal: the fencing helpers produce the documented conditional UPDATE with
 * parameters only, refuse identifiers that could inject SQL, and the
 * FencedResource admits exactly the tokens that are not older than the
 * highest it has seen.
 * Method: examples for the SQL text and values; a fast-check model test of
 * FencedResource against "max so far" over random token sequences.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FencedOffError, FencedResource, fencedUpdate } from '../src/index.js';

describe('fencedUpdate', () => {
  it('builds UPDATE … SET …, fence = $token WHERE id = $id AND fence <= $token', () => {
    const q = fencedUpdate({ table: 'invoices', set: { status: 'paid', amount: 10 }, id: 42, token: 7 });
    expect(q.text).toBe('UPDATE "invoices" SET "status" = $1, "amount" = $2, "fence" = $3 WHERE "id" = $4 AND "fence" <= $3');
    expect(q.values).toEqual(['paid', 10, 7, 42]);
  });

  it('strict mode needs a newer token (fence < $token), custom columns and schema', () => {
    const q = fencedUpdate({
      table: 'billing.invoices',
      set: { v: 1 },
      id: 'a',
      token: 9,
      idColumn: 'key',
      fenceColumn: 'lock_token',
      allowSameToken: false,
    });
    expect(q.text).toBe('UPDATE "billing"."invoices" SET "v" = $1, "lock_token" = $2 WHERE "key" = $3 AND "lock_token" < $2');
  });

  it.each([
    [{ table: 'x; DROP TABLE y', set: { v: 1 }, id: 1, token: 1 }, /table/],
    [{ table: 't', set: { 'v = 1, w': 1 }, id: 1, token: 1 }, /column/],
    [{ table: 't', set: {}, id: 1, token: 1 }, /at least one column/],
    [{ table: 't', set: { v: 1 }, id: 1, token: 0 }, /positive integer/],
    [{ table: 't', set: { fence: 1 }, id: 1, token: 3 }, /set by fencedUpdate/],
  ])('rejects %j', (opts, message) => {
    expect(() => fencedUpdate(opts)).toThrow(message);
  });
});

describe('FencedResource', () => {
  it('admits newer and equal tokens, refuses older ones', async () => {
    const r = new FencedResource();
    expect(r.admit('/ls/a/x', 5)).toBe(true);
    expect(r.admit('/ls/a/x', 5)).toBe(true);
    expect(r.admit('/ls/a/x', 4)).toBe(false);
    expect(r.admit('/ls/a/y', 1)).toBe(true);
    expect(r.highestToken('/ls/a/x')).toBe(5);
    await expect(r.guard('/ls/a/x', 3, () => 'written')).rejects.toBeInstanceOf(FencedOffError);
    await expect(r.guard('/ls/a/x', 6, () => 'written')).resolves.toBe('written');
  });

  it('refuses a new name beyond namesMax instead of forgetting an old one', () => {
    const r = new FencedResource(2);
    r.admit('a', 1);
    r.admit('b', 1);
    expect(() => r.admit('c', 1)).toThrow(/at most 2 names/);
    expect(r.admit('a', 2)).toBe(true);
  });

  it('model: admits exactly the tokens >= the highest admitted so far', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('a', 'b'), fc.integer({ min: 1, max: 20 })), { maxLength: 60 }),
        fc.boolean(),
        (writes, same) => {
          const r = new FencedResource(10, same);
          const top = new Map<string, number>();
          for (const [name, token] of writes) {
            const t = top.get(name) ?? 0;
            const expected = same ? token >= t : token > t;
            expect(r.admit(name, token)).toBe(expected);
            if (expected) top.set(name, token);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
