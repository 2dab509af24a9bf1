/**
 * Goal: the KeepAlive stream's fast read of a request (keepalive-h2.ts
 * sessionIdOf: a one-field ASCII session id sliced without the decoder)
 * reads exactly what the contract's decoder reads: the same session id for
 * every message, and a throw for every byte string the decoder refuses.
 * Method: fast-check with a fixed seed: session ids of any Unicode and
 * length, encoded by the generated encoder (with unknown fields after them
 * sometimes), and random byte strings, each read both ways.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { lockservice } from '@fencer/protocol';
import { sessionIdOf } from '../src/keepalive-h2.js';

const SEED = 330_033;
/** Generous: the machine these run on is shared and loaded. */
const PROPERTY_TIMEOUT_MS = 60_000;

/** What the generated decoder makes of bytes: the session id, or that it refused them. */
function decoded(bytes: Buffer): { id?: string; refused?: true } {
  try {
    return { id: lockservice.KeepAliveRequest.decode(bytes).sessionId };
  } catch {
    return { refused: true };
  }
}

function fast(bytes: Buffer): { id?: string; refused?: true } {
  // Read from inside a larger buffer, as from a DATA chunk holding other frames.
  const chunk = Buffer.concat([Buffer.from([9, 9, 9]), bytes, Buffer.from([7])]);
  try {
    return { id: sessionIdOf(chunk, 3, 3 + bytes.length) };
  } catch {
    return { refused: true };
  }
}

describe('the KeepAlive request read in place', () => {
  it(
    'reads the same session id as the decoder for every encoded request',
    () => {
      fc.assert(
        fc.property(
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.uint8Array({ maxLength: 8 }),
          fc.boolean(),
          (id, extra, withExtra) => {
            const encoded = Buffer.from(lockservice.KeepAliveRequest.encode({ sessionId: id }).finish());
            // An unknown field 15 (length-delimited) after it: the decoder skips it, and so must the fast read.
            const tail = withExtra ? Buffer.concat([Buffer.from([0x7a, extra.length]), extra]) : Buffer.alloc(0);
            const bytes = Buffer.concat([encoded, tail]);
            expect(fast(bytes)).toEqual(decoded(bytes));
          },
        ),
        { seed: SEED, numRuns: 300 },
      );
    },
    PROPERTY_TIMEOUT_MS,
  );

  it(
    'refuses what the decoder refuses, and reads what it reads, for random bytes',
    () => {
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 64 }), (raw) => {
          const bytes = Buffer.from(raw);
          expect(fast(bytes)).toEqual(decoded(bytes));
        }),
        { seed: SEED + 1, numRuns: 2_000 },
      );
    },
    PROPERTY_TIMEOUT_MS,
  );

  it('reads the common form and a non-ASCII id', () => {
    const enc = (id: string): Buffer => Buffer.from(lockservice.KeepAliveRequest.encode({ sessionId: id }).finish());
    expect(fast(enc('ns:0123abcd'))).toEqual({ id: 'ns:0123abcd' });
    expect(fast(enc('ns:é✓'))).toEqual({ id: 'ns:é✓' });
    expect(fast(Buffer.alloc(0))).toEqual({ id: '' });
    expect(fast(Buffer.from([0x0a, 0x7f, 0x41]))).toEqual({ refused: true });
  });
});
