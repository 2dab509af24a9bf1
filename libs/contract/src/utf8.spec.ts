/**
 * Goal: utf8ByteLength counts what every bound of the contract is measured
 * in, the bytes of UTF-8, and flags the strings that have no UTF-8 form.
 * Method: a fast-check property against Node's own encoder, and the lone
 * surrogates by hand.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { utf8ByteLength } from './index.js';

describe('utf8ByteLength', () => {
  it('equals the length of Node’s UTF-8 encoding', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (s) => {
        expect(utf8ByteLength(s)).toBe(Buffer.byteLength(s, 'utf8'));
      }),
      { numRuns: 1000 },
    );
  });

  it('is -1 for a lone surrogate', () => {
    expect(utf8ByteLength('a\ud800b')).toBe(-1);
    expect(utf8ByteLength('\udc00')).toBe(-1);
    expect(utf8ByteLength('x\ud800')).toBe(-1);
    expect(utf8ByteLength('😀')).toBe(4);
  });
});
