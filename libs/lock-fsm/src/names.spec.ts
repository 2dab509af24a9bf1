/**
 * Goal: lock names and prefixes are validated exactly as the contract's
 * header says: "/ls/<namespace>/<rest>", segments of [A-Za-z0-9._-], no
 * empty, "." or ".." segment, at most 512 bytes in all.
 * Method: a table of valid and invalid names, boundary lengths, and a
 * fast-check property that random well-formed names parse back to their parts.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { NAME_BYTES_MAX, parseLockName, parseLockPrefix, validateLockName } from './index.js';

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
