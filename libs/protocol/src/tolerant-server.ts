/**
 * grpc-js answers INTERNAL when a request's bytes do not decode (its
 * deserializer throws, and it says "Error deserializing request"). Bad input
 * must get INVALID_ARGUMENT with a reason a person can act on, so every
 * server that clients or other processes of the fleet call (cell node,
 * router, proxy) is a TolerantServer:
 * - each service it serves decodes with decoders that never throw: bytes
 *   that do not decode become a marked value naming the method and the
 *   decoder's complaint;
 * - its interceptor answers a marked message INVALID_ARGUMENT (lock-reason
 *   INVALID_ARGUMENT) before any handler sees it, for every kind of method
 *   (unary, server streaming, client streaming, bidirectional), so no
 *   handler has to check;
 * - a message flagged compressed (gzip or deflate, as the request's
 *   grpc-encoding says) whose bytes do not decompress gets INVALID_ARGUMENT
 *   too: grpc-js decompresses before any interceptor sees the message and
 *   answers such bytes INTERNAL ("Failed to decompress message") itself, so
 *   that one status of its own is reworded on its way out.
 */
import { FencerError } from '@fencer/base';
import {
  Server,
  status as grpcStatus,
  ServerInterceptingCall,
  type ServerInterceptor,
  type ServerOptions,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { toServiceError } from './errors.js';

const UNDECODABLE = Symbol('undecodable');

interface Undecodable {
  readonly [UNDECODABLE]: string;
}

/** The same service with decoders that hand undecodable bytes on as a marked value instead of throwing. */
function tolerantService<S extends ServiceDefinition>(service: S): S {
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(service)) {
    out[name] = {
      ...def,
      requestDeserialize: (bytes: Buffer): unknown => {
        try {
          return def.requestDeserialize(bytes);
        } catch (e) {
          return {
            [UNDECODABLE]: `${def.path}: the request is not a valid message of the contract (${(e as Error).message}); check that the client was built from the same .proto`,
          } satisfies Undecodable;
        }
      },
    };
  }
  return out as S;
}

/** Why a message did not decode, or undefined for a decoded one. */
function undecodableReason(message: unknown): string | undefined {
  return typeof message === 'object' && message !== null && UNDECODABLE in message ? (message as Undecodable)[UNDECODABLE] : undefined;
}

/** grpc-js's own status for message bytes flagged compressed that do not decompress (server-interceptors.js). */
const GRPC_JS_DECOMPRESS_FAILED = 'Failed to decompress message';

type StatusOut = { code: number; details: string; metadata: unknown };

/**
 * grpc-js ends a call whose compressed message does not decompress from
 * inside its own call object (the innermost one, which every interceptor
 * wraps), with INTERNAL. That object's sendStatus is looked up on the
 * instance, so this replaces it for the call with one that rewords that
 * status, and only that one, as the client's INVALID_ARGUMENT.
 */
function rewordDecompressFailure(call: object, path: string): void {
  const inner = call as { sendStatus?: (s: StatusOut) => void };
  const send = inner.sendStatus;
  if (typeof send !== 'function') return;
  inner.sendStatus = function (this: unknown, s: StatusOut): void {
    if (s.code !== grpcStatus.INTERNAL || s.details !== GRPC_JS_DECOMPRESS_FAILED) return send.call(this, s);
    const e = toServiceError(
      new FencerError(
        'INVALID_ARGUMENT',
        `${path}: the request message is flagged compressed (grpc-encoding) but its bytes do not decompress; send it uncompressed, or compressed whole`,
      ),
    );
    send.call(this, { code: e.code, details: e.details ?? '', metadata: e.metadata });
  };
}

/** Ends a call whose message did not decode with INVALID_ARGUMENT; passes every other message on. */
const rejectUndecodable: ServerInterceptor = (method, call) => {
  rewordDecompressFailure(call, method.path);
  return new ServerInterceptingCall(call, {
    start: (next) =>
      next({
        onReceiveMessage: (message: unknown, pass: (m: unknown) => void) => {
          const reason = undecodableReason(message);
          if (reason === undefined) return pass(message);
          const { code, details, metadata } = toServiceError(new FencerError('INVALID_ARGUMENT', reason));
          call.sendStatus({ code, details: details ?? reason, metadata });
        },
      }),
  });
};

/** A grpc-js Server whose services answer request bytes that do not decode with INVALID_ARGUMENT, never INTERNAL. */
export class TolerantServer extends Server {
  constructor(options: ServerOptions = {}) {
    super({ ...options, interceptors: [rejectUndecodable, ...(options.interceptors ?? [])] });
  }

  override addService(service: ServiceDefinition, implementation: UntypedServiceImplementation): void {
    super.addService(tolerantService(service), implementation);
  }
}
