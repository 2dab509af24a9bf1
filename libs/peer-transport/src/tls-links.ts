/**
 * Mutual TLS on the links between Fencer processes (decision 0016): a
 * listener that completes the handshake, reads the verified peer's identity
 * from its certificate's URI SAN (@fencer/service tls.ts) and hands the
 * socket on by the ALPN protocol both sides agreed (the lane and gRPC share
 * a node's client port this way, with no first-bytes sniffing), and the
 * dialing side's check of the server's identity. Both sides refuse what
 * their `accepts` rule refuses: a replica takes peer traffic only from
 * certificates naming its own cell.
 */
import net from 'node:net';
import tls from 'node:tls';
import { type ChannelCredentials, ServerCredentials, credentials } from '@grpc/grpc-js';
import {
  type OpeningRefusal,
  type PeerIdentity,
  type TlsFiles,
  awaitHttp2Opening,
  describeIdentity,
  identitiesOf,
  identityOf,
  tlsHandshakeTimeoutMs,
} from '@fencer/service';
import { splitAddress } from './address.js';

/** The ALPN protocols of Fencer's links: Raft peer frames, the lane, and HTTP/2 (gRPC). */
export const ALPN = { peer: 'fencer-peer', lane: 'fencer-lane', h2: 'h2' } as const;

/** Whom a side of a link takes: undefined to take it, else why not (in words for a log). */
export type AcceptsIdentity = (id: PeerIdentity | undefined) => string | undefined;

/** Replicas of `cellId` only: the rule of a peer port, and of a replica dialing its peers. */
export function replicaOfCell(cellId: string): AcceptsIdentity {
  return (id) =>
    id?.kind === 'replica' && id.cellId === cellId ? undefined : `${describeIdentity(id)} is not a replica of cell ${cellId}`;
}

/** Any replica (of any cell): what a router, a proxy or the control plane expects of a cell node it dials. */
export const anyReplica: AcceptsIdentity = (id) => (id?.kind === 'replica' ? undefined : `${describeIdentity(id)} is not a replica`);

/** Holders of the kinds given (any name, any cell). */
export function kindsOf(...kinds: PeerIdentity['kind'][]): AcceptsIdentity {
  return (id) => (id !== undefined && kinds.includes(id.kind) ? undefined : `${describeIdentity(id)} is not a ${kinds.join(' or ')}`);
}

/**
 * A dialer's check of the server's certificate (in place of the host-name
 * check: inside a fleet, who the server is matters, not which name it was
 * dialed by; the chain is verified against the CA all the same).
 */
export function checkServerIdentity(accepts: AcceptsIdentity): tls.ConnectionOptions['checkServerIdentity'] {
  return (_host, cert) => {
    const why = accepts(identitiesOf(cert)[0]);
    return why === undefined ? undefined : new Error(`refusing the server's certificate: ${why}`);
  };
}

/** Dials host:port with mutual TLS, offering `alpn`, taking the server only when `accepts` does. */
export function dialTls(address: string, files: TlsFiles, alpn: readonly string[], accepts: AcceptsIdentity): tls.TLSSocket {
  const { host, port } = splitAddress(address);
  return tls.connect({
    host,
    port,
    // A name to send in SNI only when it is one (an IP address may not be sent).
    ...(net.isIP(host) === 0 ? { servername: host } : {}),
    ...files.clientOptions(alpn),
    checkServerIdentity: checkServerIdentity(accepts),
  });
}

export interface TlsListenOptions {
  readonly files: TlsFiles;
  /** The protocols offered, in the server's order of preference. */
  readonly alpn: readonly string[];
  readonly accepts: AcceptsIdentity;
  /**
   * 'none': a server for clients (a router's or proxy's client port) that
   * asks for no client certificate; every connection is taken with an
   * undefined identity, `accepts` unused. Default: required and checked.
   */
  readonly clientCertificate?: 'required' | 'none';
  /** An accepted connection, with what its certificate names (undefined without client certificates) and the protocol agreed ('' when none). */
  readonly onConnection: (socket: tls.TLSSocket, identity: PeerIdentity | undefined, protocol: string) => void;
  /** A connection refused: a failed handshake (plaintext, a certificate the CA did not sign, an expired one) or a refused identity. */
  readonly onRefused?: (reason: 'tls-handshake' | 'foreign-certificate', detail: string, remote: string) => void;
}

/** A TLS listener whose context follows its files (reloads), refusing what `accepts` refuses. */
export function createTlsListener(options: TlsListenOptions): { server: tls.Server; stopFollowing: () => void } {
  const { files } = options;
  const anyClient = options.clientCertificate === 'none';
  const base = anyClient ? { ...files.serverOptions(options.alpn), requestCert: false } : files.serverOptions(options.alpn);
  // A handshake that does not finish in time is dropped (slow-loris; @fencer/service connection-guard.ts).
  const serverOptions = { ...base, handshakeTimeout: tlsHandshakeTimeoutMs };
  const server = tls.createServer(serverOptions, (socket) => {
    if (anyClient) return options.onConnection(socket, undefined, typeof socket.alpnProtocol === 'string' ? socket.alpnProtocol : '');
    const id = identityOf(socket);
    const why = id === undefined ? 'an unverified or unnamed certificate' : options.accepts(id);
    if (why !== undefined || id === undefined) {
      options.onRefused?.('foreign-certificate', why ?? 'no identity', `${socket.remoteAddress}:${socket.remotePort}`);
      socket.destroy();
      return;
    }
    options.onConnection(socket, id, typeof socket.alpnProtocol === 'string' ? socket.alpnProtocol : '');
  });
  server.on('tlsClientError', (err, socket) => {
    options.onRefused?.('tls-handshake', err.message, `${socket.remoteAddress}:${socket.remotePort}`);
    socket.destroy();
  });
  return { server, stopFollowing: files.follow(server) };
}

/** A TLS port serving a grpc-js server (HTTP/2 by ALPN) to the identities `accepts` takes. */
export interface GrpcTlsPort {
  /** host:port as bound (port 0 resolved). */
  readonly address: string;
  readonly port: number;
  /** Stops accepting; the sessions already open are the grpc-js server's to close (tryShutdown, forceShutdown). */
  close(): Promise<void>;
}

/** A caller of a gRPC service served by listenGrpcTls: what its certificate names, looked up by grpc-js's `call.getPeer()`. */
export type IdentityByPeer = (peer: string) => PeerIdentity | undefined;

/**
 * Serves `server` (its services added, never bound) on `address` over mutual
 * TLS: each accepted connection, once verified and taken, goes to grpc-js
 * through its connection injector. `identityByPeer` tells a handler who its
 * caller is (by `call.getPeer()`), for checks finer than the port's.
 */
export async function listenGrpcTls(
  server: { createConnectionInjector(c: ServerCredentials): { injectConnection(s: net.Socket): void } },
  address: string,
  options: Pick<TlsListenOptions, 'files' | 'accepts' | 'onRefused' | 'clientCertificate'> & {
    /** A connection dropped before grpc-js saw it: its HTTP/2 opening was malformed or late (connection-guard.ts). */
    readonly onOpeningRefused?: (reason: OpeningRefusal) => void;
  },
): Promise<GrpcTlsPort & { identityByPeer: IdentityByPeer }> {
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
  const identities = new Map<string, PeerIdentity>();
  const { server: listener, stopFollowing } = createTlsListener({
    ...options,
    alpn: [ALPN.h2],
    onConnection: (socket, identity) => {
      const peer = `${socket.remoteAddress}:${socket.remotePort}`;
      if (identity !== undefined) identities.set(peer, identity);
      socket.once('close', () => identities.delete(peer));
      awaitHttp2Opening(socket, (s) => injector.injectConnection(s), {
        ...(options.onOpeningRefused ? { onRefused: options.onOpeningRefused } : {}),
      });
    },
  });
  const bound = await listenOn(listener, address);
  return {
    ...bound,
    identityByPeer: (peer) => identities.get(peer.replace(/^ipv[46]:/, '')),
    close: async () => {
      stopFollowing();
      await new Promise<void>((r) => listener.close(() => r()));
    },
  };
}

/** Listens on host:port; resolves with the bound address. */
export function listenOn(listener: net.Server, address: string): Promise<{ address: string; port: number }> {
  const { host, port } = splitAddress(address);
  return new Promise((resolve, reject) => {
    listener.once('error', (e) => reject(new Error(`cannot listen on ${address}: ${e.message}`)));
    listener.listen(port, host, () => {
      const a = listener.address() as net.AddressInfo;
      const shown = a.family === 'IPv6' ? `[${a.address}]` : a.address;
      resolve({ address: `${shown}:${a.port}`, port: a.port });
    });
  });
}

/** gRPC channel credentials for a dialer: this process's certificate, the server taken only when `accepts` does. */
export function grpcChannelCredentials(files: TlsFiles, accepts: AcceptsIdentity): ChannelCredentials {
  const m = files.current;
  return credentials.createSsl(m.ca, m.key, m.cert, {
    checkServerIdentity: (_host, cert) => {
      const why = accepts(identitiesOf(cert)[0]);
      return why === undefined ? undefined : new Error(`refusing the server's certificate: ${why}`);
    },
  });
}
