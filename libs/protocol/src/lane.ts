/**
 * The lane: how a router reaches a cell node's lock service without a
 * second gRPC hop. It is internal (the client contract stays gRPC, served
 * by the router); it carries the contract's unary calls as length-prefixed
 * TCP frames on the node's client port, beside gRPC on the same port (etcd
 * serves gRPC and HTTP on one port the same way, by sniffing). On this
 * machine one grpc-js call costs a few hundred microseconds of CPU on each
 * side; a lane call costs tens, so a routed call costs the leader less than
 * a direct one.
 *
 * Handshake: the caller sends LANE_MAGIC first; a node that speaks the lane
 * answers LANE_MAGIC. Anything else (an HTTP/2 server's SETTINGS, or a
 * closed connection) means no lane there: the caller uses gRPC instead.
 * A connection that starts with other bytes is handed to the grpc-js server
 * untouched, so gRPC clients (and garbage) see exactly what they saw before.
 *
 * Frames, both ways: u32 payload length, u8 type, u32 call id, payload.
 * - CALL (caller): u8 method index (LANE_METHODS), then the request's
 *   protobuf bytes;
 * - CANCEL (caller): empty; the caller gave up (deadline, its client left);
 * - OK (node): the response's protobuf bytes;
 * - ERROR (node): JSON {code, message, leaderHint?}, a FencerError;
 * - PING (caller) and PONG (node, at once, same id): a caller whose call
 *   reached its deadline with nothing at all received since it was sent
 *   asks whether the node is still there; no answer within
 *   LANE_PROBE_TIMEOUT_MS and it drops the connection (a silently cut link
 *   would otherwise hold every later call to its deadline).
 * A frame over LANE_FRAME_MAX, an unknown frame type or a call id reused
 * while in flight is a broken peer: the connection is closed. An unknown
 * method or undecodable request bytes is that call's INVALID_ARGUMENT. A
 * lost connection fails every call on it with NO_LEADER (the outcome is
 * unknown; the router retries, safe since Acquire carries request_id).
 */
import net from 'node:net';
import { ServerCredentials, type Server } from '@grpc/grpc-js';
import { ERROR_CODES, FencerError, type ErrorCode } from '@fencer/base';
import { LockServiceService } from './gen/lockservice/v1/lockservice.js';

export const LANE_MAGIC = Buffer.from('FENCER-LANE/1\n', 'latin1');
/** The unary methods of LockService the lane carries, by index. */
export const LANE_METHODS = ['openSession', 'closeSession', 'acquire', 'release', 'checkToken', 'getLock', 'listLocks'] as const;
export type LaneMethod = (typeof LANE_METHODS)[number];
/** The largest frame payload either side accepts (grpc-js's default receive limit). */
export const LANE_FRAME_MAX = 4 * 1024 * 1024;
/** Calls one lane connection may have in flight at a node; beyond, TOO_MANY_REQUESTS. */
export const LANE_CALLS_MAX = 10_000;
/** How long a caller waits for PONG before it drops a connection that went silent. */
export const LANE_PROBE_TIMEOUT_MS = 1_000;
/** How long a new connection on a muxed port may take to show which protocol it speaks. */
export const SNIFF_TIMEOUT_MS = 10_000;

const HEADER = 9;
export const FrameType = { CALL: 1, CANCEL: 2, OK: 3, ERROR: 4, PING: 5, PONG: 6 } as const;
const TYPES = new Set<number>(Object.values(FrameType));
const CODES = new Set<string>(ERROR_CODES);

export interface Frame {
  readonly type: number;
  readonly id: number;
  readonly payload: Buffer;
}

export function encodeFrame(type: number, id: number, payload: Uint8Array, prefix?: number): Buffer {
  const extra = prefix === undefined ? 0 : 1;
  const b = Buffer.allocUnsafe(HEADER + extra + payload.length);
  b.writeUInt32BE(extra + payload.length, 0);
  b.writeUInt8(type, 4);
  b.writeUInt32BE(id, 5);
  if (prefix !== undefined) b.writeUInt8(prefix, HEADER);
  b.set(payload, HEADER + extra);
  return b;
}

/** Cuts a byte stream into frames; throws (and stays broken) on a frame no peer of ours sends. */
export class FrameReader {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: Frame[] = [];
    while (this.buf.length >= HEADER) {
      const len = this.buf.readUInt32BE(0);
      if (len > LANE_FRAME_MAX) throw new Error(`lane frame of ${len} bytes is over the ${LANE_FRAME_MAX}-byte limit`);
      const type = this.buf.readUInt8(4);
      if (!TYPES.has(type)) throw new Error(`unknown lane frame type ${type}`);
      if (this.buf.length < HEADER + len) break;
      out.push({ type, id: this.buf.readUInt32BE(5), payload: this.buf.subarray(HEADER, HEADER + len) });
      this.buf = this.buf.subarray(HEADER + len);
    }
    return out;
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

export type LaneOutcome = { ok: true; value: unknown } | { ok: false; error: FencerError };

/**
 * Serves one call: the node's lock service, the same as for a gRPC call
 * marked forwarded (a follower answers NOT_LEADER with a leader-hint rather
 * than forwarding). Returns how to cancel it.
 */
export type LaneDispatch = (method: LaneMethod, request: unknown, answer: (o: LaneOutcome) => void) => () => void;

/** A node's end of one lane connection (after the handshake). */
export class LaneConnection {
  private readonly reader = new FrameReader();
  private readonly calls = new Map<number, () => void>();
  private closed = false;
  private draining = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly dispatch: LaneDispatch,
    private readonly onProtocolError: (reason: string) => void = () => {},
  ) {
    socket.on('data', (d: Buffer) => this.receive(d));
    socket.on('close', () => this.teardown());
    socket.on('error', () => socket.destroy());
  }

  /** Ends the connection once the calls in flight are answered. */
  drain(): void {
    this.draining = true;
    if (this.calls.size === 0) this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  onClosed(f: () => void): void {
    if (this.socket.destroyed) f();
    else this.socket.once('close', f);
  }

  private receive(d: Buffer): void {
    let frames: Frame[];
    try {
      frames = this.reader.push(d);
    } catch (e) {
      this.onProtocolError((e as Error).message);
      this.socket.destroy();
      return;
    }
    for (const f of frames) {
      if (this.closed) return;
      if (f.type === FrameType.CANCEL) {
        const cancel = this.calls.get(f.id);
        this.calls.delete(f.id);
        cancel?.();
        this.maybeEnd();
      } else if (f.type === FrameType.PING) {
        this.write(encodeFrame(FrameType.PONG, f.id, Buffer.alloc(0)));
      } else if (f.type === FrameType.CALL) {
        if (this.calls.has(f.id)) {
          this.onProtocolError(`call id ${f.id} reused while in flight`);
          this.socket.destroy();
          return;
        }
        this.call(f);
      } else {
        this.onProtocolError(`frame type ${f.type} is the node's to send`);
        this.socket.destroy();
        return;
      }
    }
  }

  private call(f: Frame): void {
    const fail = (e: FencerError): void => void this.write(encodeFrame(FrameType.ERROR, f.id, errorPayload(e)));
    const method = f.payload.length > 0 ? LANE_METHODS[f.payload[0]!] : undefined;
    if (method === undefined) return fail(new FencerError('INVALID_ARGUMENT', `lane call ${f.id} names no known method`));
    if (this.draining) return fail(new FencerError('SHUTTING_DOWN', 'the node is shutting down; call another replica'));
    if (this.calls.size >= LANE_CALLS_MAX)
      return fail(new FencerError('TOO_MANY_REQUESTS', `this lane connection has ${LANE_CALLS_MAX} calls in flight; retry with backoff`));
    const def = LockServiceService[method];
    let request: unknown;
    try {
      request = def.requestDeserialize(Buffer.from(f.payload.subarray(1)));
    } catch (e) {
      return fail(
        new FencerError('INVALID_ARGUMENT', `${def.path}: the request is not a valid message of the contract (${(e as Error).message})`),
      );
    }
    let answered = false;
    this.calls.set(f.id, () => (answered = true));
    const cancel = this.dispatch(method, request, (o) => {
      if (answered || this.closed) return;
      answered = true;
      this.calls.delete(f.id);
      if (o.ok) {
        const bytes = (def.responseSerialize as (v: unknown) => Buffer)(o.value);
        this.write(encodeFrame(FrameType.OK, f.id, bytes));
      } else {
        this.write(encodeFrame(FrameType.ERROR, f.id, errorPayload(o.error)));
      }
      this.maybeEnd();
    });
    if (!answered) {
      this.calls.set(f.id, () => {
        answered = true;
        cancel();
      });
    }
  }

  private write(b: Buffer): void {
    if (!this.closed) writeCoalesced(this.socket, b);
  }

  private maybeEnd(): void {
    if (this.draining && this.calls.size === 0) this.socket.end();
  }

  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    const cancels = [...this.calls.values()];
    this.calls.clear();
    for (const c of cancels) c();
  }
}

/** A port that serves gRPC (through grpc-js's connection injector) and the lane (LANE_MAGIC first) side by side. */
export interface MuxedPort {
  /** host:port as bound (port 0 resolved). */
  readonly address: string;
  /** Lane connections open now. */
  readonly laneConnections: number;
  /** Stops accepting; lane connections end once their calls are answered. gRPC's sessions are the grpc-js server's to close (tryShutdown, forceShutdown). */
  close(): Promise<void>;
  /** Drops every lane connection now. */
  destroy(): void;
}

export interface MuxOptions {
  readonly dispatch: LaneDispatch;
  /** A lane peer broke the framing (its connection is closed). */
  readonly onProtocolError?: (reason: string) => void;
}

function splitHostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  if (at < 0) throw new Error(`${address} is not host:port`);
  const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(at + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${address} has no valid port`);
  return { host, port };
}

/** Listens on host:port; each connection is sniffed: LANE_MAGIC → the lane, anything else → the grpc-js server. */
export async function listenMuxed(server: Server, address: string, options: MuxOptions): Promise<MuxedPort> {
  const { host, port } = splitHostPort(address);
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
  const lanes = new Set<LaneConnection>();
  const sniffing = new Set<net.Socket>();
  const sniff = (socket: net.Socket): void => {
    sniffing.add(socket);
    socket.once('close', () => sniffing.delete(socket));
    let seen: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), SNIFF_TIMEOUT_MS);
    const decide = (lane: boolean): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      sniffing.delete(socket);
      socket.pause();
      if (lane) {
        const rest = seen.subarray(LANE_MAGIC.length);
        socket.setNoDelay(true);
        socket.write(LANE_MAGIC);
        const c = new LaneConnection(socket, options.dispatch, options.onProtocolError);
        lanes.add(c);
        socket.once('close', () => lanes.delete(c));
        if (rest.length > 0) socket.unshift(rest);
        socket.resume();
      } else {
        socket.unshift(seen);
        injector.injectConnection(socket);
      }
    };
    const onData = (d: Buffer): void => {
      seen = seen.length === 0 ? d : Buffer.concat([seen, d]);
      const n = Math.min(seen.length, LANE_MAGIC.length);
      if (!seen.subarray(0, n).equals(LANE_MAGIC.subarray(0, n))) decide(false);
      else if (seen.length >= LANE_MAGIC.length) decide(true);
    };
    const onError = (): void => {
      clearTimeout(timer);
      socket.destroy();
    };
    socket.on('data', onData);
    socket.on('error', onError);
    socket.once('close', () => clearTimeout(timer));
  };
  const listener = net.createServer({ noDelay: true }, sniff);
  await new Promise<void>((resolve, reject) => {
    listener.once('error', (e) => reject(new Error(`cannot listen on ${address}: ${e.message}`)));
    listener.listen(port, host, () => resolve());
  });
  const bound = listener.address() as net.AddressInfo;
  const shown = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return {
    address: `${shown}:${bound.port}`,
    get laneConnections() {
      return lanes.size;
    },
    close: async () => {
      listener.close();
      for (const s of sniffing) s.destroy();
      const closing = [...lanes].map((c) => new Promise<void>((r) => c.onClosed(r)));
      for (const c of lanes) c.drain();
      await Promise.all(closing);
    },
    destroy: () => {
      listener.close();
      for (const c of lanes) c.destroy();
      for (const s of sniffing) s.destroy();
    },
  };
}
