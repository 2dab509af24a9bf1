/**
 * Goal: our hand-written CRC-32C is the standard one. Method: published
 * check values (RFC 3720 appendix B.4, the "123456789" check value), and a
 * bit-at-a-time reference compared on random inputs, split points and seeds.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32c } from '../src/index.js';

function reference(data: Uint8Array, seed = 0): number {
  let crc = ~seed >>> 0;
  for (const b of data) {
    crc ^= b;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return ~crc >>> 0;
}

describe('crc32c', () => {
  it('matches the published check values', () => {
    expect(crc32c(Uint8Array.from('123456789', (c) => c.charCodeAt(0)))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa); // RFC 3720 B.4: 32 bytes of zeros
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43); // 32 bytes of ones
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e); // incrementing
    expect(crc32c(new Uint8Array(0))).toBe(0);
  });

  it('equals the bitwise reference, also when continued from a seed', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.nat(), (data, cut) => {
        const at = data.length === 0 ? 0 : cut % (data.length + 1);
        const whole = crc32c(data);
        expect(whole).toBe(reference(data));
        // Continuing from the crc of a prefix gives the crc of the whole.
        expect(crc32c(data, crc32c(data, 0, 0, at), at)).toBe(whole);
      }),
      { numRuns: 300 },
    );
  });
});
