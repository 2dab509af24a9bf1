/**
 * The gRPC server a router or proxy serves the lock contract on: the
 * contract's service on a TolerantServer (request bytes that do not decode
 * get INVALID_ARGUMENT, @fencer/protocol), listening on host:port (port 0
 * picks one), and a stop that waits for calls to finish for a moment, then
 * cuts the rest. The listener is ours, not grpc-js's: each connection's
 * HTTP/2 opening must arrive whole and in time before grpc-js takes it, and
 * a connection idle for connectionIdleMs gets GOAWAY (@fencer/service
 * connection-guard.ts: against slow-loris).
 */
import net from 'node:net';
import { ServerCredentials } from '@grpc/grpc-js';
import { TolerantServer, lockservice } from '@fencer/protocol';
import { type GrpcTlsPort, listenGrpcTls, listenOn } from '@fencer/peer-transport';
import { type TlsFiles, awaitHttp2Opening, grpcIdleServerOptions } from '@fencer/service';

/** Calls still open this long after a stop began are cut. */
const SHUTDOWN_GRACE_MS = 2_000;

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
export async function startLockServer(handlers: lockservice.LockServiceServer, address: string, tls?: TlsFiles): Promise<LockServer> {
  const server = new TolerantServer({
    'grpc.max_receive_message_length': 4 * 1024 * 1024,
    'grpc.enable_channelz': 0,
    ...grpcIdleServerOptions(),
  });
  server.addService(lockservice.LockServiceService, handlers);
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
