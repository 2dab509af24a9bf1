/**
 * Goal: the contract's id formats: a session id embeds its namespace so
 * routers need no lookup, and every id is bounded as the contract says,
 * with the contract's reason codes. The copies of these rules that base
 * keeps for its remaining importers agree with the contract's.
 * Method: boundary cases per id, and fast-check properties comparing the
 * contract's functions with base's copies over strings drawn from the
 * characters that matter (the alphabet, the separator, a slash, non-ASCII).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as base from '@fencer/base';
import {
  CLIENT_ID_BYTES_MAX,
  MEMBER_ID_BYTES_MAX,
  REQUEST_ID_BYTES_MAX,
  SESSION_ID_BYTES_MAX,
  SESSION_ID_SEPARATOR,
  checkClientId,
  checkMemberId,
  checkRequestId,
  checkSessionId,
  isValidNamespace,
  makeSessionId,
  namespaceOfSessionId,
} from './index.js';

describe('session ids', () => {
  it('embed their namespace so routers need no lookup', () => {
    const id = makeSessionId(base.Namespace('payments'), '7f3a9c');
    expect(id).toBe('payments:7f3a9c');
    expect(namespaceOfSessionId(id)).toBe('payments');
    expect(namespaceOfSessionId('no-separator')).toBeUndefined();
    expect(namespaceOfSessionId(':x')).toBeUndefined();
    expect(namespaceOfSessionId('bad/ns:x')).toBeUndefined();
  });

  it('are "<namespace>:<unique>" of at most SESSION_ID_BYTES_MAX bytes, inside the namespace asked for', () => {
    expect(checkSessionId('payments:abc')).toBeUndefined();
    expect(checkSessionId('payments:abc', 'payments')).toBeUndefined();
    expect(checkSessionId('payments:abc', 'billing')).toMatchObject({ code: 'INVALID_ARGUMENT', message: /namespace "billing"/ });
    expect(checkSessionId('payments:')).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(checkSessionId('payments:a b')).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(checkSessionId('noseparator')).toMatchObject({ code: 'INVALID_ARGUMENT' });
    const longest = `p:${'u'.repeat(SESSION_ID_BYTES_MAX - 2)}`;
    expect(checkSessionId(longest)).toBeUndefined();
    expect(checkSessionId(`${longest}u`)).toMatchObject({ code: 'INVALID_ARGUMENT', message: /at most 192 bytes/ });
  });

  it('the separator is outside the namespace alphabet', () => {
    expect(isValidNamespace(`a${SESSION_ID_SEPARATOR}b`)).toBe(false);
  });
});

describe('request, client and member ids', () => {
  it('request_id is required and at most REQUEST_ID_BYTES_MAX bytes of UTF-8', () => {
    expect(checkRequestId('')).toMatchObject({ code: 'MISSING_REQUEST_ID' });
    expect(checkRequestId('r'.repeat(REQUEST_ID_BYTES_MAX))).toBeUndefined();
    expect(checkRequestId('é'.repeat(REQUEST_ID_BYTES_MAX / 2 + 1))).toMatchObject({ code: 'INVALID_ARGUMENT', message: /got 130/ });
    expect(checkRequestId('x\ud800')).toMatchObject({ code: 'INVALID_ARGUMENT', message: /lone surrogate/ });
  });

  it('client_id may be empty and is at most CLIENT_ID_BYTES_MAX bytes of UTF-8', () => {
    expect(checkClientId('')).toBeUndefined();
    expect(checkClientId('w'.repeat(CLIENT_ID_BYTES_MAX))).toBeUndefined();
    expect(checkClientId('w'.repeat(CLIENT_ID_BYTES_MAX + 1))).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('member ids are 1 to MEMBER_ID_BYTES_MAX characters of [A-Za-z0-9._-]', () => {
    expect(checkMemberId('cell-1-r3')).toBeUndefined();
    expect(checkMemberId('m'.repeat(MEMBER_ID_BYTES_MAX))).toBeUndefined();
    for (const bad of ['', 'm'.repeat(MEMBER_ID_BYTES_MAX + 1), 'a/b', 'a:b'])
      expect(checkMemberId(bad)).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe("base's copies for its remaining importers", () => {
  const chars = fc.constantFrom(...'aZ09._-:/ é'.split(''));

  it('agree with the contract on namespaces and session ids', () => {
    fc.assert(
      fc.property(fc.string({ unit: chars, maxLength: 70 }), (s) => {
        expect(base.isValidNamespace(s)).toBe(isValidNamespace(s));
        expect(base.namespaceOfSessionId(s)).toBe(namespaceOfSessionId(s));
      }),
      { numRuns: 3000 },
    );
    expect(base.SESSION_ID_SEPARATOR).toBe(SESSION_ID_SEPARATOR);
    expect(base.makeSessionId(base.Namespace('a'), 'b')).toBe(makeSessionId(base.Namespace('a'), 'b'));
  });
});
