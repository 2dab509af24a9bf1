/**
 * Goal: the one length-prefix decoder (TCP peer frames and the lane) yields
 * the same frames however the stream is cut into chunks; it never throws,
 * whatever bytes arrive, but reports a length over its limit or a header
 * its framing refuses, from the header alone, with the whole frames before
 * it; once broken it reads nothing more.
 * Method: fast-check over framed payloads cut at random points and over
 * random bytes; a few hand-made headers.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { LengthPrefixDecoder, type Framing } from '../src/index.js';

/** A framing like the lane's: 4-byte length, one type byte that must be 1 or 2, then the payload. */
const typed: Framing = {
  headerBytes: 5,
  payloadBytesMax: 1_000,
  name: 'test frame',
  checkHeader: (h) => (h[4] === 1 || h[4] === 2 ? undefined : `type ${h[4]}`),
};

function frame(type: number, payload: Uint8Array): Buffer {
  const b = Buffer.alloc(5 + payload.length);
  b.writeUInt32BE(payload.length, 0);
  b.writeUInt8(type, 4);
  b.set(payload, 5);
  return b;
}

/** Pushes `bytes` cut after each of `cuts` (chunk lengths); returns every frame and the first error. */
function decodeInChunks(decoder: LengthPrefixDecoder, bytes: Buffer, cuts: readonly number[]): { frames: Buffer[]; error?: string } {
  const frames: Buffer[] = [];
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    const end = Math.min(bytes.length, at + cut);
    const got = decoder.push(bytes.subarray(at, end));
    frames.push(...got.frames);
    if (got.error !== undefined) return { frames, error: got.error };
    at = end;
  }
  return { frames };
}

describe('length-prefix decoder', () => {
  it('yields the same whole frames, header included, whatever the chunk boundaries', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(1, 2), fc.uint8Array({ maxLength: 300 })), { maxLength: 10 }),
        fc.array(fc.nat({ max: 40 }), { maxLength: 40 }),
        (specs, cuts) => {
          const frames = specs.map(([t, p]) => frame(t, p));
          const decoder = new LengthPrefixDecoder(typed);
          const got = decodeInChunks(decoder, Buffer.concat(frames), cuts);
          expect(got.error).toBeUndefined();
          expect(got.frames.map((f) => [...f])).toEqual(frames.map((f) => [...f]));
          expect(decoder.bytesCopied).toBeLessThanOrEqual(frames.reduce((n, f) => n + f.length, 0));
        },
      ),
    );
  });

  it('never throws on arbitrary bytes, and once it reports an error reads nothing more', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2_000 }), fc.array(fc.nat({ max: 64 }), { maxLength: 20 }), (bytes, cuts) => {
        const decoder = new LengthPrefixDecoder(typed);
        const got = decodeInChunks(decoder, Buffer.from(bytes), cuts);
        for (const f of got.frames) expect(f.length).toBe(5 + f.readUInt32BE(0));
        if (got.error !== undefined) {
          expect(got.error).toMatch(/over the 1000-byte limit|^type \d+$/);
          expect(decoder.push(frame(1, new Uint8Array(3)))).toEqual({ frames: [], error: got.error });
        }
      }),
    );
  });

  it('refuses a length over the limit from the header alone, after the whole frames before it', () => {
    const decoder = new LengthPrefixDecoder(typed);
    const oversized = Buffer.from([0, 0, 0x03, 0xe9, 1]); // 1,001 bytes declared, none sent
    const got = decoder.push(Buffer.concat([frame(1, Buffer.from('ok')), oversized]));
    expect(got.frames.map((f) => f.subarray(5).toString())).toEqual(['ok']);
    expect(got.error).toBe('test frame of 1001 bytes is over the 1000-byte limit');
  });

  it('asks its framing about a header once it is complete, even when it straddles chunks', () => {
    const decoder = new LengthPrefixDecoder(typed);
    const bad = frame(7, Buffer.alloc(500));
    expect(decoder.push(bad.subarray(0, 3))).toEqual({ frames: [] });
    expect(decoder.push(bad.subarray(3, 5))).toEqual({ frames: [], error: 'type 7' });
  });

  it('takes a frame of the largest length and an empty one', () => {
    const decoder = new LengthPrefixDecoder(typed);
    const got = decoder.push(Buffer.concat([frame(2, Buffer.alloc(1_000, 9)), frame(1, Buffer.alloc(0))]));
    expect(got.error).toBeUndefined();
    expect(got.frames.map((f) => f.length)).toEqual([1_005, 5]);
  });
});
