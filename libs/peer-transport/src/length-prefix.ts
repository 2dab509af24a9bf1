/**
 * The one length-prefix decoder, for the TCP peer frames and the lane alike:
 * a frame is a header of `headerBytes` that starts with a big-endian u32
 * counting the payload bytes after the header, then the payload.
 *
 * It reads bytes from the network, so nothing it is given makes it throw:
 * a length over `payloadBytesMax`, or a header its `checkHeader` refuses, is
 * reported as `error` (with every whole frame before it), the decoder stays
 * broken and drops whatever else arrives, and the caller closes that
 * connection and counts the refusal. The header is judged as soon as it is
 * complete, so an oversized or foreign frame is refused before its payload
 * is waited for.
 *
 * Chunks are kept as they arrive and joined once, when a whole frame is
 * there: a 64 MiB frame arriving in 64 KiB reads is copied once, not once
 * per read. A frame that sits in one chunk is handed out as a view of it.
 */
import { assert } from '@fencer/base';

/** Bytes of the u32 length every header starts with. */
const lengthBytes = 4;

export interface Framing {
  /** Bytes before the payload, the length prefix included. */
  readonly headerBytes: number;
  /** The largest payload length a header may declare. */
  readonly payloadBytesMax: number;
  /** What a frame is called in an error ("frame", "lane frame"). */
  readonly name: string;
  /**
   * Refuses a complete header for what it says beyond its length (a frame type no peer sends); undefined takes it.
   * `header` starts with the header and may run on past it.
   */
  readonly checkHeader?: (header: Buffer) => string | undefined;
}

export interface Decoded {
  /** Whole frames, header included, in the order they arrived. */
  readonly frames: Buffer[];
  /** Why the stream cannot be read further: the caller closes the connection. */
  readonly error?: string;
}

export class LengthPrefixDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private error: string | undefined;
  /** The header of the frame at the front, once checked (each header is checked once). */
  private checkedLength: number | undefined;
  /** Bytes copied to join chunks into frames so far (each byte at most once). */
  bytesCopied = 0;

  constructor(private readonly framing: Framing) {
    assert(framing.headerBytes >= lengthBytes, `a header of ${framing.headerBytes} bytes has no room for the length`);
    assert(framing.payloadBytesMax >= 0 && framing.payloadBytesMax <= 0xffff_ffff, 'the payload limit fits the u32 length');
  }

  /** Takes the next bytes of the stream; returns the frames they completed, or why the stream is broken. */
  push(chunk: Buffer): Decoded {
    if (this.error !== undefined) return { frames: [], error: this.error };
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const frames: Buffer[] = [];
    while (this.buffered >= this.framing.headerBytes) {
      const length = this.frontLength();
      if (length === undefined) return this.broken(frames);
      if (this.buffered < this.framing.headerBytes + length) break;
      this.checkedLength = undefined;
      frames.push(this.take(this.framing.headerBytes + length));
    }
    return { frames };
  }

  /** The payload length of the frame at the front, checked once; undefined when its header is refused. */
  private frontLength(): number | undefined {
    if (this.checkedLength !== undefined) return this.checkedLength;
    const header = this.peek(this.framing.headerBytes);
    const length = header.readUInt32BE(0);
    const { name, payloadBytesMax, checkHeader } = this.framing;
    if (length > payloadBytesMax) this.error = `${name} of ${length} bytes is over the ${payloadBytesMax}-byte limit`;
    else this.error = checkHeader?.(header);
    if (this.error !== undefined) return undefined;
    this.checkedLength = length;
    return length;
  }

  /** Reports the error with the frames found before it, and drops what is buffered: nothing more is read. */
  private broken(frames: Buffer[]): Decoded {
    assert(this.error !== undefined, 'a broken stream says why');
    this.chunks = [];
    this.buffered = 0;
    return { frames, error: this.error };
  }

  /**
   * A buffer that starts with the next n buffered bytes, left in place: the first chunk itself when they sit in it,
   * else a copy (of a header, so small).
   */
  private peek(n: number): Buffer {
    assert(n <= this.buffered, `peeking ${n} of ${this.buffered} buffered bytes`);
    const first = this.chunks[0]!;
    if (first.length >= n) return first;
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    for (const c of this.chunks) {
      const k = Math.min(c.length, n - at);
      out.set(k === c.length ? c : c.subarray(0, k), at);
      at += k;
      if (at === n) break;
    }
    return out;
  }

  /** Removes and returns the next n buffered bytes (a view when they sit in one chunk). */
  private take(n: number): Buffer {
    assert(n <= this.buffered, `taking ${n} of ${this.buffered} buffered bytes`);
    this.buffered -= n;
    const first = this.chunks[0]!;
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - at);
      out.set(k === c.length ? c : c.subarray(0, k), at);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.bytesCopied += n;
    return out;
  }
}
