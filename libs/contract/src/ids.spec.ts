/**
 * Goal: the contract's id formats: a session id embeds its namespace so
 * routers need no lookup, and every id is bounded as the contract says,
 * with the contract's reason codes.
 * Method: boundary cases per id, and a fast-check property over strings
 * drawn from the characters that matter (the alphabet, the separator, a
 * slash, non-ASCII): a session id made in a valid namespace gives that
 * namespace back, whatever its unique part holds.
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

describe('the namespace a session id embeds', () => {
  const chars = fc.constantFrom(...'aZ09._-:/ é'.split(''));
  it('is the one it was made in, whatever the unique part holds', () => {
    fc.assert(
      fc.property(fc.string({ unit: chars, minLength: 1, maxLength: 12 }), fc.string({ unit: chars, maxLength: 12 }), (ns, unique) => {
        fc.pre(isValidNamespace(ns));
        expect(namespaceOfSessionId(makeSessionId(base.Namespace(ns), unique))).toBe(ns);
      }),
    );
  });
});
