// gRPC streams written as raw frames over node:http2, for load generators
// whose own cost must stay far below the server's: each request is encoded
// once, many are written in one stream write, and answers are parsed in
// place. Also the few protobuf wire helpers those encoders and parsers need.
import http2 from 'node:http2';

/** HTTP/2 flow-control windows of the generator's connections: large, so the server never waits for a WINDOW_UPDATE. */
const STREAM_WINDOW_BYTES = 16 * 1024 * 1024;
const CONNECTION_WINDOW_BYTES = 64 * 1024 * 1024;
/** After the client's half-close a server ends each stream; one that does not is cut this long after. */
const CLOSE_GRACE_MS = 5_000;

/** A protobuf varint of a non-negative integer (number, bigint or decimal string). */
export function varint(n) {
  let v = BigInt(n);
  const out = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}

/** One gRPC message frame (uncompressed, length-prefixed) around protobuf bytes. */
export function grpcFrame(msg) {
  const head = Buffer.from([0, msg.length >>> 24, (msg.length >>> 16) & 255, (msg.length >>> 8) & 255, msg.length & 255]);
  return Buffer.concat([head, msg]);
}

/** Reads the varint at `at`: [value (number, exact below 2^53), next offset]. */
export function readVarint(b, at) {
  let v = 0;
  let mul = 1;
  for (;;) {
    const x = b[at++];
    v += (x & 0x7f) * mul;
    if (x < 0x80) return [v, at];
    mul *= 128;
  }
}

/** Skips the field with this tag at `at`; the offset after it. */
export function skipField(b, tag, at) {
  switch (tag & 7) {
    case 0:
      return readVarint(b, at)[1];
    case 2: {
      const [len, from] = readVarint(b, at);
      return from + len;
    }
    case 1:
      return at + 8;
    case 5:
      return at + 4;
    default:
      throw new Error(`unexpected wire type in tag ${tag}`);
  }
}

/** Splits a stream's data into gRPC messages; `onMessage(buf, start, end)` gets each one's protobuf bytes. */
function messageSplitter(onMessage) {
  let rest = Buffer.alloc(0);
  return (chunk) => {
    const b = rest.length ? Buffer.concat([rest, chunk]) : chunk;
    let at = 0;
    while (b.length - at >= 5) {
      const len = b.readUInt32BE(at + 1);
      if (b.length - at - 5 < len) break;
      onMessage(b, at + 5, at + 5 + len);
      at += 5 + len;
    }
    rest = at === b.length ? Buffer.alloc(0) : b.subarray(at);
  };
}

/** The error a stream's trailers (or trailers-only answer) carry, undefined for OK. */
function statusError(headers) {
  const st = headers?.['grpc-status'];
  if (st === undefined || st === '0') return undefined;
  return new Error(`grpc-status ${st}: ${decodeURIComponent(headers['grpc-message'] ?? '')}`);
}

/**
 * `count` bidi gRPC streams of one method on one HTTP/2 connection to
 * `address`. `onMessage(buf, start, end, k)` gets each answer's protobuf
 * bytes and the index of its stream;
 * `onEnd(err)` each stream's end (err when its status is not OK, or on a
 * connection error). write(k, buf) writes raw frames on stream k.
 */
export function rawStreams(address, methodPath, count, onMessage, onEnd) {
  const session = http2.connect(`http://${address}`, { settings: { initialWindowSize: STREAM_WINDOW_BYTES } });
  session.on('error', (e) => onEnd(e));
  session.on('connect', () => session.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
  const streams = Array.from({ length: count }, (_, k) => {
    const req = session.request({ ':method': 'POST', ':path': methodPath, 'content-type': 'application/grpc', te: 'trailers' });
    req.on(
      'data',
      messageSplitter((b, start, end) => onMessage(b, start, end, k)),
    );
    req.on('trailers', (h) => onEnd(statusError(h)));
    req.on('response', (h) => h['grpc-status'] !== undefined && onEnd(statusError(h)));
    req.on('error', (e) => onEnd(e));
    return req;
  });
  return {
    write: (k, buf) => streams[k].write(buf),
    close: async () => {
      for (const s of streams) s.end();
      const cut = setTimeout(() => session.destroy(), CLOSE_GRACE_MS);
      await new Promise((resolve) => session.close(resolve));
      clearTimeout(cut);
    },
  };
}
