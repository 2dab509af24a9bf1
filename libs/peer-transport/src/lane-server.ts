/**
 * The node's end of the lane (the wire format is lane-frames.ts): a port
 * that serves gRPC and the lane side by side, sniffing each connection
 * (LANE_MAGIC first: the lane; anything else: the grpc-js server,
 * untouched), and one lane connection's calls, each served as a forwarded
 * call of the node's lock service (`LaneDispatch`). A connection that
 * breaks the framing is closed and reported (`onProtocolError`); a call it
 * cannot serve is answered with an ERROR frame.
 */
import net from 'node:net';
import { ServerCredentials, type Server } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { lockservice } from '@fencer/protocol';
import { type OpeningRefusal, type PeerIdentity, awaitHttp2Opening } from '@fencer/service';
import {
  LANE_MAGIC,
  LANE_METHODS,
  type LaneFrame,
  LaneFrameReader,
  LaneFrameType,
  type LaneMethod,
  encodeLaneFrame,
  errorPayload,
  splitToken,
  writeCoalesced,
} from './lane-frames.js';
import { laneCallsMax, laneSniffTimeoutMs } from './limits.js';
import { ALPN, type IdentityByPeer, type TlsListenOptions, createTlsListener, listenOn } from './tls-links.js';

export type LaneOutcome = { ok: true; value: unknown } | { ok: false; error: FencerError };

/**
 * Serves one call: the node's lock service, the same as for a gRPC call
 * marked forwarded (a follower answers NOT_LEADER with a leader-hint rather
 * than forwarding). Returns how to cancel it.
 */
/** `token`: the caller's `authorization: Bearer` token, when its frame carried one (CALL_WITH_TOKEN). */
export type LaneDispatch = (method: LaneMethod, request: unknown, answer: (o: LaneOutcome) => void, token?: string) => () => void;

/** A node's end of one lane connection (after the handshake). */
export class LaneConnection {
  private readonly reader = new LaneFrameReader();
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
    const { frames, error } = this.reader.push(d);
    // A connection that broke the framing is not served further, not even the whole frames before the break.
    if (error !== undefined) return this.broken(error);
    for (const f of frames) {
      if (this.closed) return;
      if (f.type === LaneFrameType.CANCEL) {
        const cancel = this.calls.get(f.id);
        this.calls.delete(f.id);
        cancel?.();
        this.maybeEnd();
      } else if (f.type === LaneFrameType.PING) {
        this.write(encodeLaneFrame(LaneFrameType.PONG, f.id, Buffer.alloc(0)));
      } else if (f.type === LaneFrameType.CALL || f.type === LaneFrameType.CALL_WITH_TOKEN) {
        if (this.calls.has(f.id)) return this.broken(`call id ${f.id} reused while in flight`);
        this.call(f);
      } else {
        return this.broken(`frame type ${f.type} is the node's to send`);
      }
    }
  }

  /** The caller broke the protocol: the connection is closed (its calls cancelled as it closes) and the reason reported. */
  private broken(reason: string): void {
    this.onProtocolError(reason);
    this.socket.destroy();
  }

  private call(f: LaneFrame): void {
    const fail = (e: FencerError): void => void this.write(encodeLaneFrame(LaneFrameType.ERROR, f.id, errorPayload(e)));
    const method = f.payload.length > 0 ? LANE_METHODS[f.payload[0]!] : undefined;
    if (method === undefined) return fail(new FencerError('INVALID_ARGUMENT', `lane call ${f.id} names no known method`));
    if (this.draining) return fail(new FencerError('SHUTTING_DOWN', 'the node is shutting down; call another replica'));
    if (this.calls.size >= laneCallsMax)
      return fail(new FencerError('TOO_MANY_REQUESTS', `this lane connection has ${laneCallsMax} calls in flight; retry with backoff`));
    const def = lockservice.LockServiceService[method];
    let body = f.payload.subarray(1);
    let token: string | undefined;
    if (f.type === LaneFrameType.CALL_WITH_TOKEN) {
      const split = splitToken(body);
      if (split === undefined) return fail(new FencerError('INVALID_ARGUMENT', `lane call ${f.id}: its token's length is wrong`));
      ({ token, request: body } = split);
    }
    let request: unknown;
    try {
      request = def.requestDeserialize(Buffer.from(body));
    } catch (e) {
      return fail(
        new FencerError('INVALID_ARGUMENT', `${def.path}: the request is not a valid message of the contract (${(e as Error).message})`),
      );
    }
    let answered = false;
    this.calls.set(f.id, () => (answered = true));
    const cancel = this.dispatch(
      method,
      request,
      (o) => {
        if (answered || this.closed) return;
        answered = true;
        this.calls.delete(f.id);
        if (o.ok) {
          const bytes = (def.responseSerialize as (v: unknown) => Buffer)(o.value);
          this.write(encodeLaneFrame(LaneFrameType.OK, f.id, bytes));
        } else {
          this.write(encodeLaneFrame(LaneFrameType.ERROR, f.id, errorPayload(o.error)));
        }
        this.maybeEnd();
      },
      token,
    );
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
  /** With TLS: who a gRPC caller is, by `call.getPeer()` (undefined without TLS). */
  readonly identityByPeer: IdentityByPeer;
}

export interface MuxOptions {
  readonly dispatch: LaneDispatch;
  /** A lane peer broke the framing (its connection is closed). */
  readonly onProtocolError?: (reason: string) => void;
  /**
   * Mutual TLS: the port serves only the certificates `accepts` takes, and
   * the protocol is the one agreed by ALPN (ALPN.lane or ALPN.h2) rather
   * than guessed from the first bytes; a lane connection still opens with
   * LANE_MAGIC both ways (the lane's own version check).
   */
  readonly tls?: Pick<TlsListenOptions, 'files' | 'accepts' | 'onRefused'>;
  /** A gRPC connection dropped before grpc-js saw it: its HTTP/2 opening was malformed or late (@fencer/service connection-guard.ts). */
  readonly onOpeningRefused?: (reason: OpeningRefusal) => void;
}

/**
 * The muxed port's listener: plain TCP, each connection sniffed; or mutual
 * TLS, where the protocol is the one both sides agreed in the handshake (the
 * lane, which its magic still opens, or gRPC, handed to `toGrpc`).
 */
function muxListener(
  options: MuxOptions,
  sniff: (socket: net.Socket) => void,
  toGrpc: (socket: net.Socket, identity: PeerIdentity | undefined) => void,
): { listener: net.Server; stopFollowing: () => void } {
  if (options.tls === undefined) return { listener: net.createServer({ noDelay: true }, sniff), stopFollowing: () => {} };
  const { server, stopFollowing } = createTlsListener({
    ...options.tls,
    alpn: [ALPN.h2, ALPN.lane],
    onConnection: (socket, identity, protocol) => (protocol === ALPN.lane ? sniff(socket) : toGrpc(socket, identity)),
  });
  return { listener: server, stopFollowing };
}

/** Listens on host:port; without TLS each connection is sniffed (LANE_MAGIC → the lane, anything else → the grpc-js server), with TLS routed by ALPN. */
export async function listenMuxed(server: Server, address: string, options: MuxOptions): Promise<MuxedPort> {
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
  const openingRefusals = options.onOpeningRefused ? { onRefused: options.onOpeningRefused } : {};
  const lanes = new Set<LaneConnection>();
  const sniffing = new Set<net.Socket>();
  const sniff = (socket: net.Socket): void => {
    sniffing.add(socket);
    socket.once('close', () => sniffing.delete(socket));
    let seen: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), laneSniffTimeoutMs);
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
        // gRPC: its HTTP/2 opening must come whole and in time before grpc-js takes the socket (connection-guard.ts).
        awaitHttp2Opening(socket, (s) => injector.injectConnection(s), { seen, ...openingRefusals });
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
  const identities = new Map<string, PeerIdentity>();
  const { listener, stopFollowing } = muxListener(options, sniff, (socket, identity) => {
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    if (identity !== undefined) identities.set(peer, identity);
    socket.once('close', () => identities.delete(peer));
    awaitHttp2Opening(socket, (s) => injector.injectConnection(s), openingRefusals);
  });
  const { address: boundAddress } = await listenOn(listener, address);
  return {
    address: boundAddress,
    get laneConnections() {
      return lanes.size;
    },
    identityByPeer: (peer) => identities.get(peer.replace(/^ipv[46]:/, '')),
    close: async () => {
      stopFollowing();
      listener.close();
      for (const s of sniffing) s.destroy();
      const closing = [...lanes].map((c) => new Promise<void>((r) => c.onClosed(r)));
      for (const c of lanes) c.drain();
      await Promise.all(closing);
    },
    destroy: () => {
      stopFollowing();
      listener.close();
      for (const c of lanes) c.destroy();
      for (const s of sniffing) s.destroy();
    },
  };
}
