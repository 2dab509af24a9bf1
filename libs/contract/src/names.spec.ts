/**
 * Goal: lock names, prefixes and namespaces are validated exactly as the
 * contract's header says: "/ls/<namespace>/<rest>", segments of
 * [A-Za-z0-9._-], no empty, "." or ".." segment, at most 512 bytes in all,
 * a namespace of at most 64; and the namespace check agrees with the
 * namespace a parsed name yields.
 * Method: a table of valid and invalid names, boundary lengths, and
 * fast-check properties: random well-formed names parse back to their
 * parts, and random strings are namespaces exactly when they are the first
 * segment of a valid name.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  NAME_BYTES_MAX,
  NAMESPACE_BYTES_MAX,
  checkNamespace,
  isLockNameIn,
  isValidNamespace,
  parseLockName,
  parseLockPrefix,
  validateLockName,
} from './index.js';

describe('parseLockName', () => {
  it.each([
    ['/ls/payments/invoices/42', 'payments', 'invoices/42'],
    ['/ls/a/b', 'a', 'b'],
    ['/ls/Pay_ments-1.0/x.y_z-9', 'Pay_ments-1.0', 'x.y_z-9'],
    ['/ls/p/...', 'p', '...'],
    ['/ls/p/.hidden/..x', 'p', '.hidden/..x'],
  ])('accepts %s', (name, namespace, rest) => {
    expect(parseLockName(name)).toEqual({ ok: true, namespace, rest });
  });

  it.each([
    ['', 'must start with'],
    ['ls/payments/x', 'must start with'],
    ['/lsx/payments/x', 'must start with'],
    ['/ls/payments', 'needs a path below'],
    ['/ls/payments/', 'needs a path below'],
    ['/ls//x', 'empty path segment'],
    ['/ls/payments//x', 'empty path segment'],
    ['/ls/payments/x/', 'empty path segment'],
    ['/ls/./x', '"." and ".."'],
    ['/ls/../x', '"." and ".."'],
    ['/ls/payments/a/./b', '"." and ".."'],
    ['/ls/payments/a/..', '"." and ".."'],
    ['/ls/payments/a b', 'outside [A-Za-z0-9._-]'],
    ['/ls/payments/a:b', 'outside [A-Za-z0-9._-]'],
    ['/ls/payments/é', 'outside [A-Za-z0-9._-]'],
    ['/ls/payments/a\u0000', 'outside [A-Za-z0-9._-]'],
    [`/ls/${'n'.repeat(65)}/x`, 'namespace is at most 64'],
  ])('rejects %j (%s)', (name, why) => {
    const r = parseLockName(name);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.code).toBe('INVALID_NAME');
      expect(r.message).toContain(why);
    }
  });

  it('accepts exactly 512 bytes and rejects 513', () => {
    const head = '/ls/payments/';
    const at = (n: number) => head + 'x'.repeat(n - head.length);
    expect(at(NAME_BYTES_MAX).length).toBe(512);
    expect(parseLockName(at(NAME_BYTES_MAX)).ok).toBe(true);
    expect(parseLockName(at(NAME_BYTES_MAX + 1))).toMatchObject({ ok: false, code: 'INVALID_NAME' });
  });

  it('parses random well-formed names back to their namespace and rest', () => {
    const segment = fc.stringMatching(/^[A-Za-z0-9._-]{1,12}$/).filter((s) => s !== '.' && s !== '..');
    fc.assert(
      fc.property(segment, fc.array(segment, { minLength: 1, maxLength: 6 }), (ns, rest) => {
        const name = `/ls/${ns}/${rest.join('/')}`;
        expect(parseLockName(name)).toEqual({ ok: true, namespace: ns, rest: rest.join('/') });
      }),
    );
  });
});

describe('validateLockName', () => {
  it('tells INVALID_NAME from WRONG_NAMESPACE', () => {
    expect(validateLockName('/ls/payments/x', 'payments')).toBeUndefined();
    expect(validateLockName('/ls/payments/x')).toBeUndefined();
    expect(validateLockName('/ls/billing/x', 'payments')).toMatchObject({ code: 'WRONG_NAMESPACE' });
    expect(validateLockName('/ls/billing/', 'payments')).toMatchObject({ code: 'INVALID_NAME' });
  });
});

describe('parseLockPrefix', () => {
  it.each([
    ['/ls/payments/', 'payments'],
    ['/ls/payments/inv', 'payments'],
    ['/ls/payments/invoices/', 'payments'],
    ['/ls/payments/invoices/.', 'payments'],
  ])('accepts %s', (prefix, namespace) => {
    expect(parseLockPrefix(prefix)).toEqual({ ok: true, namespace });
  });

  it.each(['/ls/', '/ls/payments', '/ls/pay ments/', '/ls/payments//', '/ls/payments/a/../', '/x/payments/'])('rejects %j', (prefix) => {
    expect(parseLockPrefix(prefix)).toMatchObject({ ok: false, code: 'INVALID_NAME' });
  });
});

describe('namespaces', () => {
  it.each(['payments', 'a', 'Pay_ments-1.0', '...', 'n'.repeat(NAMESPACE_BYTES_MAX)])('accepts %j', (ns) => {
    expect(isValidNamespace(ns)).toBe(true);
    expect(checkNamespace(ns)).toBeUndefined();
  });

  it.each(['', '.', '..', 'a/b', 'a:b', 'a b', 'é', 'n'.repeat(NAMESPACE_BYTES_MAX + 1)])('rejects %j with INVALID_NAME', (ns) => {
    expect(isValidNamespace(ns)).toBe(false);
    expect(checkNamespace(ns)).toMatchObject({
      code: 'INVALID_NAME',
      message: expect.stringMatching(/1-64 characters of \[A-Za-z0-9._-\]/),
    });
  });

  it('a string is a namespace exactly when it heads a valid lock name', () => {
    const chars = fc.constantFrom(...'aZ09._-/: é'.split(''));
    fc.assert(
      fc.property(fc.string({ unit: chars, maxLength: 70 }), (ns) => {
        const parsed = parseLockName(`/ls/${ns}/x`);
        expect(isValidNamespace(ns)).toBe(parsed.ok && parsed.namespace === ns);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('isLockNameIn', () => {
  it('gives the verdict of validateLockName for names in a valid namespace', () => {
    const chars = fc.constantFrom(...'ab./-: '.split(''));
    fc.assert(
      fc.property(fc.constantFrom('ab', 'a.b', 'x'), fc.string({ unit: chars, maxLength: 12 }), (ns, tail) => {
        const name = `/ls/${tail}`;
        expect(isLockNameIn(name, ns)).toBe(validateLockName(name, ns) === undefined);
        const inside = `/ls/${ns}/${tail}`;
        expect(isLockNameIn(inside, ns)).toBe(validateLockName(inside, ns) === undefined);
      }),
      { numRuns: 2000 },
    );
  });
});
