/**
 * The gRPC server a router or proxy serves the lock contract on: the
 * contract's service on a TolerantServer (request bytes that do not decode
 * get INVALID_ARGUMENT, @fencer/protocol), listening on host:port (port 0
 * picks one), and a stop that waits for calls to finish for a moment, then
 * cuts the rest. Methods named in `raw` are served on node:http2 directly
 * (the front ends' KeepAlive, keepalive-h2.ts): grpc-js hands their streams
 * over before it builds a call, and serves every other method. The listener
 * is ours, not grpc-js's: each connection's HTTP/2 opening must arrive whole
 * and in time before grpc-js takes it, and a connection idle for
 * connectionIdleMs gets GOAWAY (@fencer/service connection-guard.ts:
 * against slow-loris).
 */
import net from 'node:net';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { type Server, ServerCredentials } from '@grpc/grpc-js';
import { TolerantServer, lockservice } from '@fencer/protocol';
import { type GrpcTlsPort, listenGrpcTls, listenOn } from '@fencer/peer-transport';
import { type TlsFiles, awaitHttp2Opening, grpcIdleServerOptions } from '@fencer/service';
import { MESSAGE_BYTES_MAX } from './keepalive-h2.js';

/**
 * The contract's service, except that a Watch stream may also be written
 * bytes already encoded: a group of coalesced watches encodes each event
 * once for all its members (watch-group.ts).
 */
const LOCK_SERVICE = {
  ...lockservice.LockServiceService,
  watch: {
    ...lockservice.LockServiceService.watch,
    responseSerialize: (value: lockservice.WatchEvent | Buffer): Buffer =>
      Buffer.isBuffer(value) ? value : lockservice.LockServiceService.watch.responseSerialize(value),
  },
};

/** Calls still open this long after a stop began are cut. */
const SHUTDOWN_GRACE_MS = 2_000;

/** Serves one method's HTTP/2 streams itself (the path's content-type was checked: application/grpc). */
export type RawStreamHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

type GrpcStreamHandler = (this: unknown, extra: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

/** The two members of grpc-js's Server (1.14) the raw route goes through; private there, so checked at start. */
interface GrpcServerInternals {
  _streamHandler?: GrpcStreamHandler;
  onStreamOpened?: (this: unknown, stream: ServerHttp2Stream) => void;
}

/**
 * Routes the streams of the methods in `raw` to their handlers before
 * grpc-js sees them, as grpc-js's own stream handler begins (an error
 * listener, the idle-timeout count, the content-type check); everything
 * else goes to grpc-js. Its handler is bound when a port is bound, so this
 * runs before; channelz must be off (it has a second handler).
 */
function routeRawStreams(server: Server, raw: ReadonlyMap<string, RawStreamHandler>): void {
  const internals = server as unknown as GrpcServerInternals;
  const grpcHandler = internals._streamHandler;
  const opened = internals.onStreamOpened;
  if (typeof grpcHandler !== 'function' || typeof opened !== 'function') {
    throw new Error('@grpc/grpc-js has no Server._streamHandler/onStreamOpened: the raw KeepAlive route (lock-server.ts) needs updating');
  }
  internals._streamHandler = function (this: unknown, extra, stream, headers) {
    const path = headers[':path'];
    const own = typeof path === 'string' ? raw.get(path) : undefined;
    if (own === undefined) return grpcHandler.call(this, extra, stream, headers);
    stream.once('error', () => {}); // an error is followed by 'close', which the handler hears
    opened.call(this, stream);
    const type = headers['content-type'];
    if (typeof type !== 'string' || !type.startsWith('application/grpc')) {
      stream.respond({ ':status': 415 }, { endStream: true });
      return;
    }
    own(stream, headers);
  };
}

export interface LockServer {
  /** host:port actually bound. */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * `tls`: serve clients over TLS (this front end's certificate, reloaded on
 * change or SIGHUP; clients present none: a tenant proves itself with its
 * token), and refuse plaintext.
 */
export async function startLockServer(
  handlers: lockservice.LockServiceServer,
  address: string,
  tls?: TlsFiles,
  raw: ReadonlyMap<string, RawStreamHandler> = new Map(),
): Promise<LockServer> {
  // Channelz stays off: the raw route replaces the handler used without it.
  const server = new TolerantServer({
    'grpc.max_receive_message_length': MESSAGE_BYTES_MAX,
    'grpc.enable_channelz': 0,
    ...grpcIdleServerOptions(),
  });
  server.addService(LOCK_SERVICE, handlers);
  if (raw.size > 0) routeRawStreams(server, raw);
  let tlsPort: GrpcTlsPort | undefined;
  let plain: net.Server | undefined;
  let port: number;
  if (tls === undefined) {
    const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
    plain = net.createServer({ noDelay: true }, (socket) => awaitHttp2Opening(socket, (s) => injector.injectConnection(s)));
    port = (await listenOn(plain, address)).port;
  } else {
    tlsPort = await listenGrpcTls(server, address, { files: tls, accepts: () => undefined, clientCertificate: 'none' });
    port = tlsPort.port;
  }
  return {
    address: `${address.slice(0, address.lastIndexOf(':'))}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        void tlsPort?.close();
        plain?.close();
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, SHUTDOWN_GRACE_MS);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
