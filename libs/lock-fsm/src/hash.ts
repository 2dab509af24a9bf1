/**
 * FNV-1a, 64-bit (Fowler, Noll, Vo), over a byte string: a fast non-crypto
 * digest for comparing replicas' states. It only has to detect divergence,
 * not resist an adversary. JavaScript has no cheap 64-bit integers, so the
 * hash is kept in four 16-bit limbs and the multiplication by the FNV prime
 * 2^40 + 0x1b3 is done limb by limb.
 */
export function fnv1a64(bytes: Uint8Array): string {
  // Offset basis 0xcbf29ce484222325, low limb first.
  let h0 = 0x2325;
  let h1 = 0x8422;
  let h2 = 0x9ce4;
  let h3 = 0xcbf2;
  for (let i = 0; i < bytes.length; i++) {
    h0 ^= bytes[i] as number;
    // h * 0x1b3, plus h << 40 (which lands in limbs 2 and 3 as h0 << 8 and h1 << 8).
    const t0 = h0 * 0x1b3;
    let t1 = h1 * 0x1b3;
    let t2 = h2 * 0x1b3 + (h0 << 8);
    const t3 = h3 * 0x1b3 + (h1 << 8);
    t1 += t0 >>> 16;
    h0 = t0 & 0xffff;
    t2 += t1 >>> 16;
    h1 = t1 & 0xffff;
    h3 = (t3 + (t2 >>> 16)) & 0xffff;
    h2 = t2 & 0xffff;
  }
  return hex4(h3) + hex4(h2) + hex4(h1) + hex4(h0);
}

function hex4(limb: number): string {
  return limb.toString(16).padStart(4, '0');
}
