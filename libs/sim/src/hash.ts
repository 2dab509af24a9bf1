/**
 * A fast, non-cryptographic 64-bit hash (two 32-bit lanes) for trace hashes
 * and entry digests. Collisions only matter if a real divergence happens to
 * collide, which at 2^-64 per comparison we accept.
 */

export class Hasher {
  private h1 = 0x811c9dc5;
  private h2 = 0x9747b28c;

  /** Mixes a 32-bit word. */
  word(x: number): this {
    this.h1 = Math.imul(this.h1 ^ (x >>> 0), 0x01000193) >>> 0;
    let k = Math.imul(x >>> 0, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    let h = this.h2 ^ k;
    h = (h << 13) | (h >>> 19);
    this.h2 = (Math.imul(h, 5) + 0xe6546b64) >>> 0;
    return this;
  }

  /** Mixes a non-negative integer up to 2^53 (or any number via its bits when not an integer). */
  num(n: number): this {
    if (Number.isSafeInteger(n) && n >= 0) {
      this.word(n >>> 0);
      return this.word(Math.floor(n / 0x1_0000_0000));
    }
    const f = new Float64Array([n]);
    const u = new Uint32Array(f.buffer);
    return this.word(u[0] ?? 0).word(u[1] ?? 0);
  }

  str(s: string): this {
    this.word(s.length);
    for (let i = 0; i < s.length; i++) this.word(s.charCodeAt(i));
    return this;
  }

  bytes(b: Uint8Array): this {
    this.word(b.length);
    let i = 0;
    for (; i + 4 <= b.length; i += 4) {
      this.word((b[i] ?? 0) | ((b[i + 1] ?? 0) << 8) | ((b[i + 2] ?? 0) << 16) | ((b[i + 3] ?? 0) << 24));
    }
    let tail = 0;
    for (let s = 0; i < b.length; i++, s += 8) tail |= (b[i] ?? 0) << s;
    return this.word(tail);
  }

  /** 16 hex digits, after a finalising avalanche. */
  hex(): string {
    const f1 = fmix(this.h1 ^ this.h2);
    const f2 = fmix(this.h2 + Math.imul(this.h1, 0x85ebca6b));
    return f1.toString(16).padStart(8, '0') + f2.toString(16).padStart(8, '0');
  }
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Digest of an entry's payload (with its type), as a short string for maps.
 * Cached per payload object: in the simulator the same entry object travels
 * to every replica, so most lookups hit.
 */
const digests = new WeakMap<Uint8Array, string>();
const digestsByType: [WeakMap<Uint8Array, string>, WeakMap<Uint8Array, string>] = [digests, new WeakMap()];

export function digest(type: number, data: Uint8Array): string {
  const cache = digestsByType[type === 0 ? 0 : 1];
  let d = cache.get(data);
  if (d === undefined) {
    d = new Hasher().word(type).bytes(data).hex();
    cache.set(data, d);
  }
  return d;
}
