/**
 * Per-namespace (tenant) credentials: the hashes of the tokens that may call
 * the lock service for one namespace (docs/decisions/0016-tenant-credentials-and-mtls.md).
 *
 * The control plane stores each tenant's token hashes (the current one and
 * those still in a rotation's grace period) and replicates them into the
 * owning cell's log with SetNamespaceCredentials; they travel with the
 * namespace in its export. Apply only stores them: whether a hash is still
 * valid is a comparison of its `validUntilMs` (wall-clock milliseconds,
 * stamped by the control plane) with the cell's injected clock, made by the
 * cell when it checks a call, outside the state machine (decision 0002: apply
 * never reads a clock). So every replica holds the same hashes, and a
 * replica whose clock runs late honours a rotated-out token a little longer,
 * never a token the log does not list.
 */
import { assertUint } from '@fencer/base';
import type { ByteReader, ByteWriter } from './codec.js';
import type { Failure, FsmErrorCode } from './types.js';

// validate.ts checks commands with checkCredentials: its `fail` is not imported here, so the two files stay out of a cycle.
function fail(code: FsmErrorCode, message: string): Failure {
  return { ok: false, code, message };
}

/** One token's hash ("sha256:" + 64 hex digits); `validUntilMs` 0 = no expiry (the current token). */
export interface CredentialHash {
  readonly hash: string;
  /** Wall-clock milliseconds after which the token is refused (a rotated-out one); 0 = no expiry. */
  readonly validUntilMs: number;
}

/** The namespace's token hashes, newest first; empty = no tenant token reaches it (only the admin's). */
export type NamespaceCredentials = readonly CredentialHash[];

export const NO_CREDENTIALS: NamespaceCredentials = Object.freeze([]);

/** Hashes one namespace keeps: the current token and those in a grace period (the meta group keeps 4). */
export const CREDENTIAL_HASHES_MAX = 8;
/** Characters of one hash: "sha256:" + 64 hex digits, with room for another scheme. */
export const CREDENTIAL_HASH_CHARS_MAX = 128;

/** Undefined when the list is well-formed: at most CREDENTIAL_HASHES_MAX printable hashes, each expiry a safe integer >= 0. */
export function checkCredentials(credentials: NamespaceCredentials): Failure | undefined {
  if (!Array.isArray(credentials)) return fail('INVALID_ARGUMENT', 'credentials must be a list of token hashes');
  if (credentials.length > CREDENTIAL_HASHES_MAX)
    return fail('INVALID_ARGUMENT', `a namespace keeps at most ${CREDENTIAL_HASHES_MAX} token hashes, got ${credentials.length}`);
  for (const c of credentials) {
    const { hash, validUntilMs } = (c ?? {}) as Partial<CredentialHash>;
    if (typeof hash !== 'string' || hash.length === 0 || hash.length > CREDENTIAL_HASH_CHARS_MAX || !/^[\x21-\x7e]+$/.test(hash))
      return fail('INVALID_ARGUMENT', `a token hash must be 1-${CREDENTIAL_HASH_CHARS_MAX} printable ASCII characters`);
    if (!(Number.isSafeInteger(validUntilMs) && (validUntilMs as number) >= 0))
      return fail('INVALID_ARGUMENT', `validUntilMs must be an integer >= 0 (0 = no expiry), got ${String(validUntilMs)}`);
  }
  return undefined;
}

export function sameCredentials(a: NamespaceCredentials, b: NamespaceCredentials): boolean {
  if (a.length !== b.length) return false;
  return a.every((c, i) => c.hash === b[i]!.hash && c.validUntilMs === b[i]!.validUntilMs);
}

/** A frozen canonical copy (the shared constant when empty), so equal lists encode and compare alike. */
export function normalCredentials(c: NamespaceCredentials): NamespaceCredentials {
  if (c.length === 0) return NO_CREDENTIALS;
  return Object.freeze(c.map((x) => Object.freeze({ hash: x.hash, validUntilMs: x.validUntilMs })));
}

export function writeCredentials(w: ByteWriter, c: NamespaceCredentials): void {
  w.varuint(c.length);
  for (const x of c) {
    assertUint(x.validUntilMs, 'credential validUntilMs');
    w.string(x.hash).varuint(x.validUntilMs);
  }
}

/** Reads a list; the caller checks it (checkCredentials) and turns a failure into its decode error. */
export function readCredentials(r: ByteReader): NamespaceCredentials {
  // Bounded before anything is allocated: a lying count is a decode error, not a huge array.
  const n = r.count(CREDENTIAL_HASHES_MAX, 'token hashes');
  const out: CredentialHash[] = [];
  for (let i = 0; i < n; i++) out.push({ hash: r.string(), validUntilMs: r.varuint() });
  return normalCredentials(out);
}

/**
 * Whether `tokenHash` is one of the namespace's, and not past its grace
 * period at `nowWallMs` (the caller's clock: never read on apply). Hashes are
 * of 256-bit random tokens, so comparing them as strings leaks nothing a
 * caller could use.
 */
export function credentialsAdmit(c: NamespaceCredentials, tokenHash: string, nowWallMs: number): boolean {
  return c.some((x) => x.hash === tokenHash && (x.validUntilMs === 0 || x.validUntilMs > nowWallMs));
}
