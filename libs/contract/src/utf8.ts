/**
 * The contract bounds strings in bytes of UTF-8. The pure libs compile
 * without DOM or Node type libraries (no TextEncoder, no Buffer), so the
 * length is counted by hand; most strings here are ASCII, one byte a char.
 */

/**
 * Byte length of `s` in UTF-8, or -1 when `s` holds a lone surrogate (it has
 * no UTF-8 form; encoding it would silently change the string).
 */
export function utf8ByteLength(s: string): number {
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d < 0xdc00 || d > 0xdfff) return -1;
      bytes += 4;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return -1;
    else bytes += 3;
  }
  return bytes;
}
