/**
 * The lane's wire format. The lane is how a router (or a follower
 * forwarding a call) reaches a cell node's lock service without a second
 * gRPC hop. It is internal (the client contract stays gRPC, served by the
 * router); it carries the contract's unary calls as length-prefixed TCP
 * frames on the node's client port, beside gRPC on the same port (etcd
 * serves gRPC and HTTP on one port the same way, by sniffing). A lane call
 * costs both sides a fraction of the CPU of a grpc-js call, so a routed
 * call costs the leader less than a direct one (docs/architecture.md, the
 * lane; docs/benchmarks.md).
 *
 * Handshake: the caller sends LANE_MAGIC first; a node that speaks the lane
 * answers LANE_MAGIC. Anything else (an HTTP/2 server's SETTINGS, or a
 * closed connection) means no lane there: the caller uses gRPC instead.
 * A connection that starts with other bytes is handed to the grpc-js server
 * untouched, so gRPC clients (and garbage) see exactly what they saw before.
 *
 * Frames, both ways: u32 payload length, u8 type, u32 call id, payload
 * (read by the one length-prefix decoder, length-prefix.ts, which refuses
 * an oversized length or an unknown type from the header alone).
 * - CALL (caller): u8 method index (LANE_METHODS), then the request's
 *   protobuf bytes;
 * - CALL_WITH_TOKEN (caller): u8 method index, u16 token length, the
 *   token's bytes (the caller's `authorization: Bearer` token, which the node
 *   checks: docs/decisions/0016-tenant-credentials-and-mtls.md), then the
 *   request's protobuf bytes;
 * - CANCEL (caller): empty; the caller gave up (deadline, its client left);
 * - OK (node): the response's protobuf bytes;
 * - ERROR (node): JSON {code, message, leaderHint?}, a FencerError;
 * - PING (caller) and PONG (node, at once, same id): a caller whose call
 *   reached its deadline with nothing at all received since it was sent
 *   asks whether the node is still there; no answer within
 *   laneProbeTimeoutMs and it drops the connection (a silently cut link
 *   would otherwise hold every later call to its deadline).
 * A frame over laneFrameBytesMax, an unknown frame type or a call id reused
 * while in flight is a broken peer: the connection is closed. An unknown
 * method or undecodable request bytes is that call's INVALID_ARGUMENT. A
 * lost connection fails every call on it with NO_LEADER (the outcome is
 * unknown; the router retries, safe since Acquire carries request_id).
 */
import type net from 'node:net';
import { ERROR_CODES, FencerError, type ErrorCode } from '@fencer/base';
import { LengthPrefixDecoder } from './length-prefix.js';
import { laneFrameBytesMax } from './limits.js';

export const LANE_MAGIC = Buffer.from('FENCER-LANE/1\n', 'latin1');
/** The unary methods of LockService the lane carries, by index. */
export const LANE_METHODS = ['openSession', 'closeSession', 'acquire', 'release', 'checkToken', 'getLock', 'listLocks'] as const;
export type LaneMethod = (typeof LANE_METHODS)[number];

/** u32 payload length, u8 type, u32 call id. */
const laneHeaderBytes = 9;
export const LaneFrameType = { CALL: 1, CANCEL: 2, OK: 3, ERROR: 4, PING: 5, PONG: 6, CALL_WITH_TOKEN: 7 } as const;
/** Bytes of a token a CALL_WITH_TOKEN frame carries at most (the contract's bearer tokens are far shorter). */
export const LANE_TOKEN_BYTES_MAX = 1024;

/** A CALL_WITH_TOKEN payload's body after the method byte: u16 token length, token, request bytes. */
export function withToken(token: string, request: Uint8Array): Buffer {
  const t = Buffer.from(token, 'latin1');
  if (t.length > LANE_TOKEN_BYTES_MAX) throw new FencerError('INVALID_ARGUMENT', `a token is at most ${LANE_TOKEN_BYTES_MAX} bytes`);
  const b = Buffer.allocUnsafe(2 + t.length + request.length);
  b.writeUInt16BE(t.length, 0);
  t.copy(b, 2);
  b.set(request, 2 + t.length);
  return b;
}

/** Splits a CALL_WITH_TOKEN body (after the method byte); undefined when its length lies. */
export function splitToken(body: Buffer): { token: string; request: Buffer } | undefined {
  if (body.length < 2) return undefined;
  const n = body.readUInt16BE(0);
  if (n > LANE_TOKEN_BYTES_MAX || 2 + n > body.length) return undefined;
  return { token: body.toString('latin1', 2, 2 + n), request: body.subarray(2 + n) };
}
const TYPES = new Set<number>(Object.values(LaneFrameType));
const CODES = new Set<string>(ERROR_CODES);

export interface LaneFrame {
  readonly type: number;
  readonly id: number;
  readonly payload: Buffer;
}

export function encodeLaneFrame(type: number, id: number, payload: Uint8Array, prefix?: number): Buffer {
  const extra = prefix === undefined ? 0 : 1;
  const b = Buffer.allocUnsafe(laneHeaderBytes + extra + payload.length);
  b.writeUInt32BE(extra + payload.length, 0);
  b.writeUInt8(type, 4);
  b.writeUInt32BE(id, 5);
  if (prefix !== undefined) b.writeUInt8(prefix, laneHeaderBytes);
  b.set(payload, laneHeaderBytes + extra);
  return b;
}

/**
 * Cuts one lane connection's bytes into frames. A frame no peer of ours
 * sends (over laneFrameBytesMax, or of an unknown type) is reported as
 * `error`, and the reader stays broken: the caller closes the connection.
 */
export class LaneFrameReader {
  private readonly decoder = new LengthPrefixDecoder({
    headerBytes: laneHeaderBytes,
    payloadBytesMax: laneFrameBytesMax,
    name: 'lane frame',
    checkHeader: (header) => (TYPES.has(header[4]!) ? undefined : `unknown lane frame type ${header[4]}`),
  });

  push(chunk: Buffer): { frames: LaneFrame[]; error?: string } {
    const { frames, error } = this.decoder.push(chunk);
    const lane = frames.map((f) => ({ type: f[4]!, id: f.readUInt32BE(5), payload: f.subarray(laneHeaderBytes) }));
    return error === undefined ? { frames: lane } : { frames: lane, error };
  }
}

const CORKED = Symbol('corked');

/**
 * Writes a frame; every frame written to a socket in one turn of the event
 * loop leaves in one writev at its end (setImmediate). Under load that is one
 * system call for many calls instead of one each; alone, it costs no wait.
 */
export function writeCoalesced(socket: net.Socket, frame: Buffer): void {
  const s = socket as net.Socket & { [CORKED]?: boolean };
  if (!s[CORKED]) {
    s[CORKED] = true;
    socket.cork();
    setImmediate(() => {
      s[CORKED] = false;
      socket.uncork();
    });
  }
  socket.write(frame);
}

export function errorPayload(e: FencerError): Buffer {
  return Buffer.from(JSON.stringify({ code: e.code, message: e.message, leaderHint: e.leaderHint }));
}

export function errorOfPayload(payload: Buffer): FencerError {
  try {
    const j = JSON.parse(payload.toString('utf8')) as { code?: unknown; message?: unknown; leaderHint?: unknown };
    const code = typeof j.code === 'string' && CODES.has(j.code) ? (j.code as ErrorCode) : 'INTERNAL';
    return new FencerError(
      code,
      typeof j.message === 'string' ? j.message : code,
      typeof j.leaderHint === 'string' ? j.leaderHint : undefined,
    );
  } catch {
    return new FencerError('INTERNAL', 'the node sent an error frame that is not JSON');
  }
}
