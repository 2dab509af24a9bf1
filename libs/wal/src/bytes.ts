/**
 * Little-endian encoding helpers. Integers up to 2^53 (indexes, terms,
 * offsets) are stored as two 32-bit halves so the format is plain u64.
 * UTF-8 by hand: the pure build has no TextEncoder in its type library.
 */
import { assert, assertUint } from '@fencer/base';

const twoTo32 = 0x1_0000_0000;

/** A growable output buffer. */
export class ByteWriter {
  buf: Uint8Array;
  length = 0;

  constructor(capacity = 256) {
    this.buf = new Uint8Array(capacity);
  }

  reserve(bytes: number): void {
    const need = this.length + bytes;
    if (need <= this.buf.length) return;
    const next = new Uint8Array(Math.max(need, this.buf.length * 2));
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }

  u8(v: number): void {
    this.reserve(1);
    this.buf[this.length++] = v;
  }

  u32(v: number): void {
    this.reserve(4);
    writeU32(this.buf, this.length, v);
    this.length += 4;
  }

  u64(v: number): void {
    assertUint(v, 'u64 value');
    this.reserve(8);
    writeU32(this.buf, this.length, v >>> 0);
    writeU32(this.buf, this.length + 4, Math.floor(v / twoTo32));
    this.length += 8;
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  /** A string as u16 byte length + UTF-8 (encoded in place: hard states carry one on every vote). */
  str(s: string): void {
    const n = utf8Length(s);
    assert(n <= 0xffff, 'string fits a u16 length');
    this.reserve(2 + n);
    this.buf[this.length++] = n & 0xff;
    this.buf[this.length++] = n >>> 8;
    this.length = utf8Write(s, this.buf, this.length);
  }

  view(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

export function writeU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
  b[at + 2] = (v >>> 16) & 0xff;
  b[at + 3] = (v >>> 24) & 0xff;
}

export function readU32(b: Uint8Array, at: number): number {
  return (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;
}

/** Thrown by ByteReader on malformed input; callers turn it into a corruption report. */
export class DecodeError extends Error {
  override readonly name = 'DecodeError';
}

/** Bounds-checked reader over a record payload or a snapshot file. */
export class ByteReader {
  constructor(
    private readonly buf: Uint8Array,
    public pos = 0,
    private readonly end = buf.length,
  ) {}

  private need(n: number): void {
    if (this.pos + n > this.end) throw new DecodeError(`truncated: need ${n} bytes at ${this.pos}, have ${this.end - this.pos}`);
  }

  u8(): number {
    this.need(1);
    return this.buf[this.pos++]!;
  }

  u32(): number {
    this.need(4);
    const v = readU32(this.buf, this.pos);
    this.pos += 4;
    return v;
  }

  u64(): number {
    this.need(8);
    const lo = readU32(this.buf, this.pos);
    const hi = readU32(this.buf, this.pos + 4);
    this.pos += 8;
    if (hi >= 0x20_0000) throw new DecodeError(`u64 beyond 2^53 at ${this.pos - 8}`);
    return hi * twoTo32 + lo;
  }

  bytes(n: number): Uint8Array {
    this.need(n);
    const b = this.buf.slice(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  str(): string {
    const n = this.u8() | (this.u8() << 8);
    this.need(n);
    const s = utf8Decode(this.buf, this.pos, this.pos + n);
    this.pos += n;
    return s;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  done(): void {
    if (this.pos !== this.end) throw new DecodeError(`${this.end - this.pos} unexpected trailing bytes`);
  }
}

export function utf8Encode(s: string): Uint8Array {
  const out = new Uint8Array(utf8Length(s));
  utf8Write(s, out, 0);
  return out;
}

/**
 * Bytes of `s` in UTF-8. Strings are taken by code point, as `for...of`
 * does: a surrogate pair is one 4-byte character, a lone surrogate 3 bytes.
 */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.codePointAt(i)!;
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c < 0x10000) n += 3;
    else {
      n += 4;
      i++;
    }
  }
  return n;
}

/** Writes `s` as UTF-8 into `b` from `at` (room for utf8Length(s) bytes); returns the end. */
function utf8Write(s: string, b: Uint8Array, at: number): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.codePointAt(i)!;
    if (c < 0x80) b[at++] = c;
    else if (c < 0x800) {
      b[at++] = 0xc0 | (c >> 6);
      b[at++] = 0x80 | (c & 0x3f);
    } else if (c < 0x10000) {
      b[at++] = 0xe0 | (c >> 12);
      b[at++] = 0x80 | ((c >> 6) & 0x3f);
      b[at++] = 0x80 | (c & 0x3f);
    } else {
      b[at++] = 0xf0 | (c >> 18);
      b[at++] = 0x80 | ((c >> 12) & 0x3f);
      b[at++] = 0x80 | ((c >> 6) & 0x3f);
      b[at++] = 0x80 | (c & 0x3f);
      i++;
    }
  }
  return at;
}

export function utf8Decode(b: Uint8Array, start: number, end: number): string {
  let s = '';
  let i = start;
  while (i < end) {
    const c = b[i]!;
    let cp: number;
    let n: number;
    if (c < 0x80) [cp, n] = [c, 1];
    else if (c >= 0xc0 && c < 0xe0) [cp, n] = [c & 0x1f, 2];
    else if (c >= 0xe0 && c < 0xf0) [cp, n] = [c & 0x0f, 3];
    else if (c >= 0xf0 && c < 0xf8) [cp, n] = [c & 0x07, 4];
    else throw new DecodeError(`bad UTF-8 lead byte at ${i}`);
    if (i + n > end) throw new DecodeError(`truncated UTF-8 at ${i}`);
    for (let k = 1; k < n; k++) {
      const cc = b[i + k]!;
      if ((cc & 0xc0) !== 0x80) throw new DecodeError(`bad UTF-8 continuation at ${i + k}`);
      cp = (cp << 6) | (cc & 0x3f);
    }
    s += String.fromCodePoint(cp);
    i += n;
  }
  return s;
}
