/**
 * grpc-js answers INTERNAL when a request's bytes do not decode. Bad input
 * must get INVALID_ARGUMENT, so the router and the proxy register the
 * contract's service with decoders that hand an undecodable message to the
 * handler as a marked value, which the handler answers in the contract's
 * words.
 */
import { FencerError } from '@fencer/base';
import type { ServiceDefinition } from '@grpc/grpc-js';

const UNDECODABLE = Symbol('undecodable');

interface Undecodable {
  readonly [UNDECODABLE]: string;
}

/** The same service with decoders that never throw. */
export function tolerantService<S extends ServiceDefinition>(service: S): S {
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(service)) {
    out[name] = {
      ...def,
      requestDeserialize: (bytes: Buffer): unknown => {
        try {
          return def.requestDeserialize(bytes);
        } catch (e) {
          return {
            [UNDECODABLE]: `${def.path}: the request is not a valid message of the contract (${(e as Error).message})`,
          } satisfies Undecodable;
        }
      },
    };
  }
  return out as S;
}

/** Throws INVALID_ARGUMENT for a request whose bytes did not decode. */
export function checkDecoded(request: unknown): void {
  if (typeof request === 'object' && request !== null && UNDECODABLE in request) {
    throw new FencerError('INVALID_ARGUMENT', (request as Undecodable)[UNDECODABLE]);
  }
}
