/**
 * One KeepAlive stream served on node:http2 directly, not through grpc-js
 * (docs/decisions/0017-the-lane.md, "The KeepAlive stream"): the request
 * frames are read in place from each DATA chunk (a session id in the common
 * form, one ASCII string field, is sliced without a decoder; any other
 * message goes through the contract's decoder), and every answer due on the
 * stream in one turn of the event loop leaves in one write of
 * length-prefixed frames encoded by hand. grpc-js's per-message path (its
 * call objects, interceptors, serializers and one write per message) was
 * most of a proxy's CPU per heartbeat.
 *
 * It speaks the wire as grpc-js does for the client: response headers with
 * the first answer, trailers (grpc-status, grpc-message, the reason's
 * metadata) at the end, a trailers-only answer for a stream refused before
 * any answer; bytes that are not a message of the contract get
 * INVALID_ARGUMENT naming the method, a message over MESSAGE_BYTES_MAX
 * RESOURCE_EXHAUSTED, a grpc-timeout DEADLINE_EXCEEDED.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { gunzipSync, inflateSync } from 'node:zlib';
import { FencerError } from '@fencer/base';
import { lockservice, toServiceError } from '@fencer/protocol';
import { status } from '@grpc/grpc-js';

export const KEEPALIVE_PATH = lockservice.LockServiceService.keepAlive.path;
/** A request message larger than this ends the stream (grpc-js's receive limit on the other methods, lock-server.ts). */
export const MESSAGE_BYTES_MAX = 4 * 1024 * 1024;
/** Length prefix of a gRPC message: a compressed flag and a 32-bit big-endian length. */
const PREFIX_BYTES = 5;
/** Room for one answer's frame around its session id: prefix, three tags, two length/ttl varints, the bool. */
const ANSWER_OVERHEAD_BYTES_MAX = PREFIX_BYTES + 3 + 5 + 10 + 1;
const OUT_BUFFER_BYTES_MIN = 4096;
/** The longest grpc-timeout honoured (the header allows 8 digits of hours). */
const DEADLINE_MS_MAX = 2 ** 31 - 1;

const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

export interface RawCallEvents {
  /** One request's session id. */
  request(sessionId: string): void;
  /** The client half-closed the stream. */
  end(): void;
  /** The stream is gone (cancelled, reset, or ended by either side); called once. */
  closed(): void;
}

const invalid = (why: string): FencerError =>
  new FencerError(
    'INVALID_ARGUMENT',
    `${KEEPALIVE_PATH}: the request is not a valid message of the contract (${why}); check that the client was built from the same .proto`,
  );

/** The session id of a KeepAliveRequest's bytes b[s, e): sliced when it is one ASCII string field, else decoded (which throws on bytes that are not one). */
export function sessionIdOf(b: Buffer, s: number, e: number): string {
  if (e - s >= 2 && b[s] === 0x0a) {
    const n = b[s + 1]!;
    if (n < 0x80 && s + 2 + n === e) {
      let i = s + 2;
      while (i < e && b[i]! < 0x80) i++;
      if (i === e) return b.toString('latin1', s + 2, e);
    }
  }
  return lockservice.KeepAliveRequest.decode(b.subarray(s, e)).sessionId;
}

/** Writes v (a non-negative integer up to 2^53) as a protobuf varint at b[at]; returns the next offset. */
function writeVarint(b: Buffer, at: number, v: number): number {
  while (v >= 0x80) {
    b[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  b[at++] = v;
  return at;
}

/** The grpc-timeout header in ms, or undefined when absent or malformed (grpc-js ignores those too). */
function deadlineMsOf(headers: IncomingHttpHeaders): number | undefined {
  const t = headers['grpc-timeout'];
  const m = typeof t === 'string' ? /^(\d{1,8})([HMSmun])$/.exec(t) : null;
  return m ? Math.min(DEADLINE_MS_MAX, Math.ceil(Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!)) : undefined;
}

export class RawKeepAliveCall {
  private events: RawCallEvents | undefined;
  /** Set once the stream is ended (by us) or gone: nothing more is read, written or reported. */
  private done = false;
  private headersSent = false;
  private trailers: OutgoingHttpHeaders = { 'grpc-status': String(status.OK) };
  /** Answers encoded since the last write, and whether a write is queued for the end of this turn. */
  private out = Buffer.allocUnsafe(OUT_BUFFER_BYTES_MIN);
  private outBytes = 0;
  private flushQueued = false;
  /** The unread tail of the request bytes (a frame cut across DATA chunks), and the bytes that complete its frame. */
  private parts: Buffer[] = [];
  private partsBytes = 0;
  private needBytes = 0;
  private deadline: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly headers: IncomingHttpHeaders,
  ) {}

  /** Starts reading: requests, the client's end and the stream's close go to `events`. */
  start(events: RawCallEvents): void {
    this.events = events;
    const s = this.stream;
    s.on('wantTrailers', () => s.sendTrailers(this.trailers));
    s.on('data', this.onData);
    s.on('end', () => !this.done && events.end());
    s.on('close', () => this.gone());
    s.on('error', () => this.gone());
    const deadlineMs = deadlineMsOf(this.headers);
    if (deadlineMs !== undefined) {
      this.deadline = setTimeout(
        () => this.fail(new FencerError('DEADLINE_EXCEEDED', 'the KeepAlive stream reached its deadline')),
        deadlineMs,
      );
    }
  }

  /** Queues one answer; the answers of this turn leave in one write at its end. */
  answer(sessionId: string, ttlMsRemaining: number, expired: boolean): void {
    if (this.done) return;
    const idBytes = Buffer.byteLength(sessionId);
    this.reserve(idBytes + ANSWER_OVERHEAD_BYTES_MAX);
    const b = this.out;
    const start = this.outBytes;
    let at = start + PREFIX_BYTES;
    b[at++] = 0x0a; // field 1 (session_id), length-delimited
    at = writeVarint(b, at, idBytes);
    at += b.write(sessionId, at, 'utf8');
    const ttl = Math.max(0, Math.floor(ttlMsRemaining));
    if (ttl > 0) {
      b[at++] = 0x10; // field 2 (ttl_ms_remaining), varint
      at = writeVarint(b, at, ttl);
    }
    if (expired) {
      b[at++] = 0x18; // field 3 (expired), varint
      b[at++] = 1;
    }
    b[start] = 0;
    b.writeUInt32BE(at - start - PREFIX_BYTES, start + 1);
    this.outBytes = at;
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(this.flush);
    }
  }

  /** Ends the stream with status OK after the answers queued. */
  finish(): void {
    this.end({ 'grpc-status': String(status.OK) });
  }

  /** Ends the stream with the error's status, message and reason (after the answers queued). */
  fail(e: FencerError): void {
    const se = toServiceError(e);
    this.end({
      'grpc-status': String(se.code),
      'grpc-message': encodeURI(se.details ?? e.message),
      ...se.metadata.toHttp2Headers(),
    });
  }

  private end(trailers: OutgoingHttpHeaders): void {
    if (this.done) return;
    this.flush();
    this.done = true;
    clearTimeout(this.deadline);
    const s = this.stream;
    this.events?.closed();
    if (s.destroyed || s.closed) return;
    if (!this.headersSent) {
      // Trailers-only: nothing was answered on this stream.
      this.headersSent = true;
      s.respond({ ':status': 200, 'content-type': 'application/grpc+proto', ...trailers }, { endStream: true });
      return;
    }
    this.trailers = trailers;
    s.end();
  }

  private gone(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.deadline);
    this.events?.closed();
  }

  private reserve(bytes: number): void {
    if (this.outBytes + bytes <= this.out.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.outBytes + bytes));
    this.out.copy(bigger, 0, 0, this.outBytes);
    this.out = bigger;
  }

  private readonly flush = (): void => {
    this.flushQueued = false;
    if (this.done || this.outBytes === 0) return;
    const s = this.stream;
    if (s.destroyed || s.closed) return;
    if (!this.headersSent) {
      this.headersSent = true;
      s.respond(
        { ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-accept-encoding': 'identity,deflate,gzip' },
        { waitForTrailers: true },
      );
    }
    const chunk = this.out.subarray(0, this.outBytes);
    // The written bytes are the stream's now: the next answers go to a fresh buffer of the same size.
    this.out = Buffer.allocUnsafe(this.out.length);
    this.outBytes = 0;
    s.write(chunk);
  };

  private readonly onData = (chunk: Buffer): void => {
    if (this.done) return;
    if (this.partsBytes > 0) {
      this.parts.push(chunk);
      this.partsBytes += chunk.length;
      if (this.partsBytes < this.needBytes) return;
      chunk = Buffer.concat(this.parts, this.partsBytes);
      this.parts = [];
      this.partsBytes = 0;
    }
    const at = this.readFrames(chunk);
    if (this.done || at === chunk.length) return;
    const rest = chunk.subarray(at);
    this.parts.push(rest);
    this.partsBytes = rest.length;
    this.needBytes = rest.length < PREFIX_BYTES ? PREFIX_BYTES : PREFIX_BYTES + rest.readUInt32BE(1);
  };

  /** Reports every whole frame of b; returns the offset of the first byte not read (a frame cut short). */
  private readFrames(b: Buffer): number {
    let at = 0;
    while (!this.done && b.length - at >= PREFIX_BYTES) {
      const len = b.readUInt32BE(at + 1);
      if (len > MESSAGE_BYTES_MAX) {
        this.fail(new FencerError('MESSAGE_TOO_LARGE', `a KeepAlive request of ${len} bytes is over the ${MESSAGE_BYTES_MAX}-byte limit`));
        return at;
      }
      if (b.length - at - PREFIX_BYTES < len) return at;
      const flag = b[at]!;
      const s = at + PREFIX_BYTES;
      at = s + len;
      const id = flag === 0 ? this.decoded(b, s, at) : this.decompressed(flag, b.subarray(s, at));
      if (id !== undefined) this.events!.request(id);
    }
    return at;
  }

  private decoded(b: Buffer, s: number, e: number): string | undefined {
    try {
      return sessionIdOf(b, s, e);
    } catch (err) {
      this.fail(invalid((err as Error).message));
      return undefined;
    }
  }

  /** A message flagged compressed: inflated as the stream's grpc-encoding says (gzip or deflate), else refused. */
  private decompressed(flag: number, bytes: Buffer): string | undefined {
    const encoding = this.headers['grpc-encoding'];
    if (flag !== 1 || (encoding !== 'gzip' && encoding !== 'deflate')) {
      this.fail(
        invalid(
          `compressed flag ${flag} with grpc-encoding ${String(encoding ?? 'identity')}; send messages uncompressed, or gzip or deflate`,
        ),
      );
      return undefined;
    }
    let plain: Buffer;
    try {
      plain = (encoding === 'gzip' ? gunzipSync : inflateSync)(bytes, { maxOutputLength: MESSAGE_BYTES_MAX });
    } catch {
      this.fail(
        new FencerError(
          'INVALID_ARGUMENT',
          `${KEEPALIVE_PATH}: the request message is flagged compressed (grpc-encoding) but its bytes do not decompress; send it uncompressed, or compressed whole`,
        ),
      );
      return undefined;
    }
    return this.decoded(plain, 0, plain.length);
  }
}
