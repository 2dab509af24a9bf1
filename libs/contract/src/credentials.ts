/**
 * How a call presents a tenant token, as the contract's header fixes it:
 * metadata `authorization: Bearer <token>` on every call and stream. The
 * refusals below are the same wherever a token is checked (a front end
 * without one, or a cell against the namespace's replicated hashes:
 * docs/decisions/0016-tenant-credentials-and-mtls.md), so a caller reads one
 * answer for each case.
 */
import { FencerError } from '@fencer/base';

/** Characters of a token: printable ASCII without spaces, at most this many. */
export const TOKEN_CHARS_MAX = 512;
/** Characters of a namespace quoted in a refusal (a name may be long; the answer stays short). */
const QUOTED_NAMESPACE_CHARS_MAX = 80;
const BEARER = new RegExp(`^Bearer ([\\x21-\\x7e]{1,${TOKEN_CHARS_MAX}})$`);

/** The token of an `authorization` value (`Bearer <token>`), from metadata or an HTTP/2 header; undefined for any other form. */
export function bearerOf(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  return BEARER.exec(value)?.[1];
}

/** The refusal of a call without a token. */
export function missingToken(): FencerError {
  return new FencerError(
    'BAD_CREDENTIALS',
    'this fleet requires a tenant token: send metadata "authorization: Bearer <token>" (the client\'s token option, $FENCER_TOKEN in the CLI)',
  );
}

/** The refusal of a token that does not grant the namespace (the same for another tenant's and a missing one). */
export function forbidden(namespace: string): FencerError {
  return new FencerError(
    'NAMESPACE_FORBIDDEN',
    `this token does not grant namespace "${namespace.slice(0, QUOTED_NAMESPACE_CHARS_MAX)}": use the tenant's current token (rotated ones stop at the end of their grace period)`,
  );
}
