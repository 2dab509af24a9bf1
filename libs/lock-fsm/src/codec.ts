/**
 * A tiny hand-written binary codec: unsigned LEB128 varints, single bytes,
 * and length-prefixed UTF-8 strings and byte strings. Commands, snapshots
 * and namespace exports all use it, so every replica writes the same bytes
 * for the same values.
 *
 * UTF-8 is written by hand (the pure libs compile without DOM or Node type
 * libraries, so TextEncoder is not available to them; the byte count is the
 * contract's utf8ByteLength); most strings here are ASCII, which takes a
 * fast path.
 */
import { assert, AssertionError } from '@fencer/base';
import { utf8ByteLength } from '@fencer/contract';

/**
 * Malformed input: truncated, overlong, invalid UTF-8, trailing bytes, or a
 * structure that breaks an invariant. Distinct from AssertionError so that a
 * namespace import can turn it into an INVALID_ARGUMENT outcome, while a
 * corrupt log entry or snapshot still crashes (the callers rethrow it as an
 * AssertionError).
 */
export class DecodeError extends Error {
  override readonly name = 'DecodeError';
}

/** Largest value a varint may carry: every number here is a safe integer. */
const VARUINT_MAX = Number.MAX_SAFE_INTEGER;
const TWO_POW_7 = 128;

export class ByteWriter {
  private buf: Uint8Array;
  private pos = 0;

  constructor(initialBytes = 256) {
    assert(initialBytes >= 16, 'writer starts with at least 16 bytes');
    this.buf = new Uint8Array(initialBytes);
  }

  get length(): number {
    return this.pos;
  }

  private ensure(more: number): void {
    const need = this.pos + more;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  u8(v: number): this {
    if ((v & 0xff) !== v) throw new AssertionError(`u8 out of range: ${v}`);
    this.ensure(1);
    this.buf[this.pos++] = v;
    return this;
  }

  bool(v: boolean): this {
    return this.u8(v ? 1 : 0);
  }

  varuint(v: number): this {
    if (!Number.isSafeInteger(v) || v < 0) throw new AssertionError(`varuint must be a non-negative safe integer, got ${v}`);
    this.ensure(8);
    const buf = this.buf;
    // Bit operators only see 32 bits: divide while the value is large.
    while (v >= 0x80000000) {
      buf[this.pos++] = (v % TWO_POW_7) | 0x80;
      v = Math.floor(v / TWO_POW_7);
    }
    while (v >= 0x80) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[this.pos++] = v;
    return this;
  }

  string(s: string): this {
    const n = s.length;
    // Room for the longest length prefix and the worst case of 3 bytes per
    // UTF-16 unit, before `buf` is captured: no reallocation below.
    this.ensure(8 + n * 3);
    const buf = this.buf;
    // ASCII fast path: write the length as if every char were one byte, and
    // fall back if one is not.
    const start = this.pos;
    this.varuint(n);
    let p = this.pos;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[p++] = c;
    }
    if (i === n) {
      this.pos = p;
      return this;
    }
    const bytes = utf8ByteLength(s);
    assert(bytes >= 0, 'string is not well-formed UTF-16 (lone surrogate); validate input before encoding');
    this.pos = start;
    this.varuint(bytes);
    p = this.pos;
    for (let j = 0; j < n; j++) {
      let c = s.charCodeAt(j);
      if (c < 0x80) buf[p++] = c;
      else if (c < 0x800) {
        buf[p++] = 0xc0 | (c >> 6);
        buf[p++] = 0x80 | (c & 0x3f);
      } else if (c >= 0xd800 && c <= 0xdbff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++j) - 0xdc00);
        buf[p++] = 0xf0 | (c >> 18);
        buf[p++] = 0x80 | ((c >> 12) & 0x3f);
        buf[p++] = 0x80 | ((c >> 6) & 0x3f);
        buf[p++] = 0x80 | (c & 0x3f);
      } else {
        buf[p++] = 0xe0 | (c >> 12);
        buf[p++] = 0x80 | ((c >> 6) & 0x3f);
        buf[p++] = 0x80 | (c & 0x3f);
      }
    }
    assert(p - this.pos === bytes, 'UTF-8 length matches the bytes written');
    this.pos = p;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.varuint(b.length);
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
    return this;
  }

  /** A copy of the bytes written, sized exactly. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.pos);
  }
}

export class ByteReader {
  private pos = 0;

  constructor(private buf: Uint8Array) {}

  /** Starts reading `buf` from its first byte: lets the command decoder reuse one reader for every entry. */
  reset(buf: Uint8Array): void {
    this.buf = buf;
    this.pos = 0;
  }

  get remaining(): number {
    return this.buf.length - this.pos;
  }

  private fail(what: string): never {
    throw new DecodeError(`${what} at byte ${this.pos} of ${this.buf.length}`);
  }

  u8(): number {
    if (this.pos >= this.buf.length) this.fail('truncated u8');
    return this.buf[this.pos++] as number;
  }

  bool(): boolean {
    const v = this.u8();
    if (v > 1) this.fail(`bool must be 0 or 1, got ${v}`);
    return v === 1;
  }

  varuint(): number {
    const buf = this.buf;
    let pos = this.pos;
    // One byte: most lengths, modes and small numbers.
    if (pos < buf.length) {
      const b = buf[pos] as number;
      if (b < 0x80) {
        this.pos = pos + 1;
        return b;
      }
    }
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (pos >= buf.length) {
        this.pos = pos;
        this.fail('truncated varuint');
      }
      const b = buf[pos++] as number;
      result += (b & 0x7f) * scale;
      if (b < 0x80) {
        this.pos = pos;
        if (b === 0 && i > 0) this.fail('overlong varuint');
        if (result > VARUINT_MAX) this.fail('varuint exceeds 2^53');
        return result;
      }
      scale *= TWO_POW_7;
    }
    this.pos = pos;
    return this.fail('varuint longer than 8 bytes');
  }

  /** A varint that must lie in [0, max]. */
  count(max: number, what: string): number {
    const n = this.varuint();
    if (n > max) this.fail(`${what} ${n} exceeds ${max}`);
    return n;
  }

  /**
   * A string that recurs from entry to entry (a session id): short ASCII
   * ones come from the intern cache, so the same string object is found
   * again, with its hash already computed for Map lookups.
   */
  recurringString(): string {
    const n = this.varuint();
    const buf = this.buf;
    const start = this.pos;
    const end = start + n;
    if (end > buf.length) this.fail('truncated string');
    this.pos = end;
    if (n > INTERN_BYTES_MAX) return isAscii(buf, start, end) ? asciiString(buf, start, end) : decodeUtf8(buf, start, end);
    // One pass: the intern hash, and whether every byte is ASCII.
    let h = 0x811c9dc5;
    let high = 0;
    for (let i = start; i < end; i++) {
      const b = buf[i] as number;
      high |= b;
      h = Math.imul(h ^ b, 0x01000193);
    }
    if (high >= 0x80) return decodeUtf8(buf, start, end);
    return internAscii(buf, start, end, h);
  }

  /**
   * A string decoded afresh. Used for everything but session ids: request
   * ids are new by design, and for lock names, measured on the benchmark
   * workload, probing the cache cost more than decoding anew.
   */
  string(): string {
    const n = this.varuint();
    const buf = this.buf;
    const start = this.pos;
    const end = start + n;
    if (end > buf.length) this.fail('truncated string');
    this.pos = end;
    return isAscii(buf, start, end) ? asciiString(buf, start, end) : decodeUtf8(buf, start, end);
  }

  bytes(): Uint8Array {
    const n = this.varuint();
    const end = this.pos + n;
    if (end > this.buf.length) this.fail('truncated bytes');
    const out = this.buf.slice(this.pos, end);
    this.pos = end;
    return out;
  }

  /** Every byte must have been read: trailing garbage means a format we do not understand. */
  end(): void {
    if (this.pos !== this.buf.length) this.fail(`${this.buf.length - this.pos} trailing bytes`);
  }
}

/**
 * String.fromCharCode typed to accept the typed array reads below as they
 * are (an index past the end reads undefined, but every caller has checked
 * the bounds).
 */
const fromCharCode = String.fromCharCode as (...codes: (number | undefined)[]) => string;

/**
 * Scratch arrays of every length up to SCRATCH_CHARS_MAX, for
 * String.fromCharCode.apply on strings longer than the explicit cases of
 * asciiString: a fresh array per call would be garbage. Reuse is safe: the
 * function is synchronous and not re-entered.
 */
const SCRATCH_CHARS_MAX = 128;
const scratchCodes: number[][] = [];
for (let n = 0; n <= SCRATCH_CHARS_MAX; n++) scratchCodes.push(new Array<number>(n).fill(0));

/**
 * The ASCII bytes [start, end) as a string. Up to 40 chars (session ids,
 * most lock names, UUID request ids), String.fromCharCode is called with
 * explicit arguments, which is faster than spreading an array through
 * apply (docs/benchmarks.md, lock state machine); building the string char
 * by char with `+=` allocates an intermediate string per char.
 */
function asciiString(buf: Uint8Array, start: number, end: number): string {
  const b = buf;
  const s = start;
  const c = fromCharCode;
  // A table, one length per line: the unrolled arguments are the point (see the comment above).
  // prettier-ignore
  switch (end - start) {
    case 0: return '';
    case 1: return c(b[s]);
    case 2: return c(b[s], b[s + 1]);
    case 3: return c(b[s], b[s + 1], b[s + 2]);
    case 4: return c(b[s], b[s + 1], b[s + 2], b[s + 3]);
    case 5: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4]);
    case 6: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5]);
    case 7: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6]);
    case 8: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7]);
    case 9: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8]);
    case 10: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9]);
    case 11: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10]);
    case 12: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11]);
    case 13: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12]);
    case 14: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13]);
    case 15: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14]);
    case 16: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15]);
    case 17: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16]);
    case 18: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17]);
    case 19: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18]);
    case 20: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19]);
    case 21: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20]);
    case 22: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21]);
    case 23: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22]);
    case 24: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23]);
    case 25: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24]);
    case 26: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25]);
    case 27: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26]);
    case 28: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27]);
    case 29: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28]);
    case 30: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29]);
    case 31: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30]);
    case 32: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31]);
    case 33: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32]);
    case 34: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33]);
    case 35: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33], b[s + 34]);
    case 36: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33], b[s + 34], b[s + 35]);
    case 37: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33], b[s + 34], b[s + 35], b[s + 36]);
    case 38: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33], b[s + 34], b[s + 35], b[s + 36], b[s + 37]);
    case 39: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33], b[s + 34], b[s + 35], b[s + 36], b[s + 37], b[s + 38]);
    case 40: return c(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7], b[s + 8], b[s + 9], b[s + 10], b[s + 11], b[s + 12], b[s + 13], b[s + 14], b[s + 15], b[s + 16], b[s + 17], b[s + 18], b[s + 19], b[s + 20], b[s + 21], b[s + 22], b[s + 23], b[s + 24], b[s + 25], b[s + 26], b[s + 27], b[s + 28], b[s + 29], b[s + 30], b[s + 31], b[s + 32], b[s + 33], b[s + 34], b[s + 35], b[s + 36], b[s + 37], b[s + 38], b[s + 39]);
    default:
      break;
  }
  const n = end - start;
  const codes = n <= SCRATCH_CHARS_MAX ? (scratchCodes[n] as number[]) : new Array<number>(n);
  for (let i = 0; i < n; i++) codes[i] = buf[start + i] as number;
  // eslint-disable-next-line prefer-spread -- apply, not spread: spreading an array this long into a call measured slower in decode (docs/benchmarks.md, lock state machine)
  return fromCharCode.apply(null, codes);
}

/**
 * Session ids recur from entry to entry (every command of a session names
 * it); decoding each anew costs an allocation, and a fresh string must be
 * hashed again when it is used as a Map key. A direct-mapped cache of
 * recently decoded short ASCII strings returns the same string object
 * instead. It changes no value, only which (equal) string object is
 * returned, so it cannot affect determinism. Other strings bypass it
 * (ByteReader.string): unique ones would only push out those that recur.
 */
const INTERN_BYTES_MAX = 64;
const INTERN_SLOTS = 8192;
const internTable: (string | undefined)[] = new Array<string | undefined>(INTERN_SLOTS).fill(undefined);

function isAscii(buf: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if ((buf[i] as number) >= 0x80) return false;
  return true;
}

/** `h` is the FNV-1a 32 hash of the bytes. */
function internAscii(buf: Uint8Array, start: number, end: number, h: number): string {
  const slot = (h ^ (h >>> 15)) & (INTERN_SLOTS - 1);
  const cached = internTable[slot];
  if (cached !== undefined && cached.length === end - start) {
    let same = true;
    for (let i = start, j = 0; i < end; i++, j++) {
      if (cached.charCodeAt(j) !== buf[i]) {
        same = false;
        break;
      }
    }
    if (same) return cached;
  }
  const s = asciiString(buf, start, end);
  internTable[slot] = s;
  return s;
}

/**
 * Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
 * Kept out of ByteReader.string: a closure there would cost the ASCII fast
 * path a context allocation on every call.
 */
function decodeUtf8(buf: Uint8Array, start: number, end: number): string {
  const fail = (what: string): never => {
    throw new DecodeError(`${what} in the string at byte ${start}`);
  };
  const units: number[] = [];
  let i = start;
  const cont = (k: number): number => {
    const b = k < end ? (buf[k] as number) : 0;
    if ((b & 0xc0) !== 0x80) fail('invalid UTF-8 continuation byte');
    return b & 0x3f;
  };
  while (i < end) {
    const b = buf[i] as number;
    if (b < 0x80) {
      units.push(b);
      i += 1;
    } else if (b >= 0xc2 && b <= 0xdf) {
      units.push(((b & 0x1f) << 6) | cont(i + 1));
      i += 2;
    } else if (b >= 0xe0 && b <= 0xef) {
      const c = ((b & 0x0f) << 12) | (cont(i + 1) << 6) | cont(i + 2);
      if (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)) fail('invalid UTF-8 three-byte sequence');
      units.push(c);
      i += 3;
    } else if (b >= 0xf0 && b <= 0xf4) {
      const c = ((b & 0x07) << 18) | (cont(i + 1) << 12) | (cont(i + 2) << 6) | cont(i + 3);
      if (c < 0x10000 || c > 0x10ffff) fail('invalid UTF-8 four-byte sequence');
      units.push(0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
      i += 4;
    } else {
      fail(`invalid UTF-8 lead byte 0x${b.toString(16)}`);
    }
  }
  let s = '';
  for (let k = 0; k < units.length; k += 4096) s += String.fromCharCode.apply(null, units.slice(k, k + 4096));
  return s;
}

/** Runs a decoder whose malformed input is a bug (log entries, snapshots): a DecodeError becomes a crash. */
export function decodeOrCrash<T>(what: string, decode: () => T): T {
  try {
    return decode();
  } catch (e) {
    if (e instanceof DecodeError) throw new AssertionError(`corrupt ${what}: ${e.message}`);
    throw e;
  }
}
