/**
 * Timeouts on the listeners of a Fencer process, against connections that
 * hold a socket without speaking (slow-loris) and against garbage that
 * would otherwise sit in the HTTP/2 layer.
 *
 * A gRPC connection opens with the HTTP/2 client preface and then the
 * client's SETTINGS frame, which every client sends at once, in its first
 * write. `awaitHttp2Opening` reads those bytes in JavaScript before the
 * socket is handed to grpc-js (which then reads it natively, where a
 * stalled frame is invisible): the opening must be complete within
 * `http2OpeningTimeoutMs`, and be well-formed (nor followed, in the bytes
 * already read, by a DATA frame before any HEADERS), or the socket is
 * destroyed.
 * Without this, a connection that sent the preface and a frame header
 * promising more bytes than it sends stays open until the client leaves:
 * nghttp2 waits for the rest of the frame, even after the peer's FIN.
 *
 * Once the opening is in, the connection is grpc-js's; its
 * `grpc.max_connection_idle_ms` (`grpcIdleServerOptions`) sends GOAWAY to a
 * connection with no call for `connectionIdleMs`, so a client that stalls
 * later, mid-frame or silent, is dropped too; a real client reconnects on
 * its next call. The TLS handshake has its own bound (`tlsHandshakeTimeoutMs`,
 * tls.Server's `handshakeTimeout`).
 */
import type net from 'node:net';

/** The HTTP/2 client connection preface (RFC 9113 §3.4). */
export const HTTP2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const FRAME_HEADER_BYTES = 9;
const SETTINGS_FRAME_TYPE = 4;
/** One SETTINGS parameter: 16-bit id, 32-bit value. */
const SETTINGS_ENTRY_BYTES = 6;
/** A client's first SETTINGS frame: RFC 9113 defines 6 parameters (grpc-js sends 3 to 5); extensions add a few. */
const SETTINGS_OPENING_BYTES_MAX = 64 * SETTINGS_ENTRY_BYTES;

/** How long a new connection may take to send the preface and its SETTINGS (a client sends both in its first write). */
export const http2OpeningTimeoutMs = 1_000;
/** A connection with no call for this long gets GOAWAY (grpc-js `grpc.max_connection_idle_ms`). */
export const connectionIdleMs = 5 * 60_000;
/** How long a TLS handshake may take before the socket is dropped (node's default is 120 s). */
export const tlsHandshakeTimeoutMs = 10_000;

/** grpc-js server options that close idle connections (see connectionIdleMs). */
export function grpcIdleServerOptions(): { 'grpc.max_connection_idle_ms': number } {
  return { 'grpc.max_connection_idle_ms': connectionIdleMs };
}

export type OpeningRefusal = 'timeout' | 'not-http2' | 'bad-settings' | 'data-before-headers' | 'closed';

export interface OpeningOptions {
  /** Bytes already read from the socket (e.g. by a sniffer), in order. */
  readonly seen?: Buffer;
  readonly timeoutMs?: number;
  /** Told why a connection was dropped (for a counter or a log line). */
  readonly onRefused?: (reason: OpeningRefusal) => void;
}

/** Whether `bytes` (the start of a connection) can still become, or already is, a valid opening; 'complete' with its length. */
export function judgeOpening(bytes: Buffer): { verdict: 'complete'; length: number } | { verdict: 'incomplete' | OpeningRefusal } {
  const prefaceSeen = Math.min(bytes.length, HTTP2_PREFACE.length);
  if (!bytes.subarray(0, prefaceSeen).equals(HTTP2_PREFACE.subarray(0, prefaceSeen))) return { verdict: 'not-http2' };
  if (bytes.length < HTTP2_PREFACE.length + FRAME_HEADER_BYTES) return { verdict: 'incomplete' };
  const head = bytes.subarray(HTTP2_PREFACE.length);
  const length = head.readUIntBE(0, 3);
  const type = head[3]!;
  const stream = head.readUInt32BE(5) & 0x7fffffff;
  const ack = (head[4]! & 1) === 1;
  if (type !== SETTINGS_FRAME_TYPE || stream !== 0 || ack) return { verdict: 'bad-settings' };
  if (length % SETTINGS_ENTRY_BYTES !== 0 || length > SETTINGS_OPENING_BYTES_MAX) return { verdict: 'bad-settings' };
  const total = HTTP2_PREFACE.length + FRAME_HEADER_BYTES + length;
  if (bytes.length < total) return { verdict: 'incomplete' };
  return dataBeforeHeaders(bytes.subarray(total)) ? { verdict: 'data-before-headers' } : { verdict: 'complete', length: total };
}

const DATA_FRAME_TYPE = 0;
const HEADERS_FRAME_TYPE = 1;
const CONTINUATION_FRAME_TYPE = 9;

/**
 * Whether the frames already read after the opening carry a DATA or
 * CONTINUATION frame before any HEADERS: no stream can be open yet, so it is
 * a protocol error (RFC 9113 §5.1) which nghttp2 ignores rather than closes
 * the connection for: such a connection would sit idle until the client
 * left. Only frames whose header is in `rest` are read; the rest is grpc-js's.
 */
function dataBeforeHeaders(rest: Buffer): boolean {
  for (let at = 0; at + FRAME_HEADER_BYTES <= rest.length;) {
    const type = rest[at + 3]!;
    if (type === HEADERS_FRAME_TYPE) return false;
    if (type === DATA_FRAME_TYPE || type === CONTINUATION_FRAME_TYPE) return true;
    at += FRAME_HEADER_BYTES + rest.readUIntBE(at, 3);
  }
  return false;
}

/**
 * Reads a new connection's HTTP/2 opening (preface and SETTINGS), then puts
 * every byte read back (`unshift`) and hands the paused socket to `ready`.
 * An opening that is malformed, or not complete within the timeout, or a
 * socket that ends first, destroys the socket instead.
 */
export function awaitHttp2Opening(socket: net.Socket, ready: (socket: net.Socket) => void, options: OpeningOptions = {}): void {
  let seen = options.seen ?? Buffer.alloc(0);
  let settled = false;
  const refuse = (reason: OpeningRefusal): void => {
    if (settled) return;
    settled = true;
    cleanup();
    options.onRefused?.(reason);
    socket.destroy();
  };
  const accept = (): void => {
    settled = true;
    cleanup();
    socket.pause();
    if (seen.length > 0) socket.unshift(seen);
    ready(socket);
  };
  const judge = (): void => {
    const j = judgeOpening(seen);
    if (j.verdict === 'complete') accept();
    else if (j.verdict !== 'incomplete') refuse(j.verdict);
  };
  const onData = (d: Buffer): void => {
    seen = seen.length === 0 ? d : Buffer.concat([seen, d]);
    judge();
  };
  const onEnd = (): void => refuse('closed');
  const onError = (): void => refuse('closed');
  // The timer runs before the poll phase that would read bytes already waiting: under a blocked loop, give that one
  // read its turn (setImmediate runs after it) before calling the connection silent.
  const timer = setTimeout(() => setImmediate(() => refuse('timeout')), options.timeoutMs ?? http2OpeningTimeoutMs);
  const cleanup = (): void => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.off('error', onError);
  };
  socket.on('error', onError);
  socket.on('end', onEnd);
  judge();
  if (settled) return;
  socket.on('data', onData);
  socket.resume();
}
