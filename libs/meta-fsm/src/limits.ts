/**
 * Every limit of the meta state machine, in one place (CONTRIBUTING.md, "Limits").
 * They are replicated semantics: every control-plane instance of a meta
 * group must run with the same values. The HTTP layer checks the shape of
 * each field first (the contract's JSON schemas); apply checks again, so a
 * bad entry can never change the state.
 */
import { assert } from '@fencer/base';

/** Contract: a tenant's name (its namespace) is a lock-name segment starting with a letter or digit, at most 63 more bytes. */
export const TENANT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
/** Contract: TenantCreate.owner maxLength. */
export const OWNER_CHARS_MAX = 256;
/** Cell ids come from the control plane's cell list; a short bound keeps records small. */
export const CELL_ID_CHARS_MAX = 64;
/** Move and snapshot ids are minted by the control plane (UUIDs); room for prefixes. */
export const RECORD_ID_CHARS_MAX = 128;
/** Contract: Idempotency-Key maxLength. */
export const IDEMPOTENCY_KEY_CHARS_MAX = 128;
/** A request fingerprint (a hex SHA-256 of method, path and body). */
export const FINGERPRINT_CHARS_MAX = 128;
/** A token hash ("sha256:" + 64 hex digits) with room for another scheme. */
export const TOKEN_HASH_CHARS_MAX = 128;
/** Free text the snapshot/move records carry (error, location, sha256). */
export const NOTE_CHARS_MAX = 1024;

export interface MetaLimits {
  /** Tenants (and so routes) the fleet holds. */
  readonly tenantsMax: number;
  /** Move records the journal keeps; the oldest finished ones are forgotten first. */
  readonly movesMax: number;
  /** Snapshot records the catalogue keeps; the oldest finished ones are forgotten first. */
  readonly snapshotsMax: number;
  /** Idempotency keys remembered, oldest forgotten first: a retry must come within this many writes. */
  readonly idempotencyKeysMax: number;
  /** Token hashes one tenant holds at once: the current one and those still in their grace period. */
  readonly tokenHashesPerTenantMax: number;
}

export const META_LIMITS: MetaLimits = {
  tenantsMax: 10_000,
  movesMax: 10_000,
  snapshotsMax: 10_000,
  idempotencyKeysMax: 10_000,
  tokenHashesPerTenantMax: 4,
};

export function checkMetaLimits(limits: MetaLimits): void {
  for (const [name, value] of Object.entries(limits)) assert(Number.isSafeInteger(value) && value >= 1, `${name} is a positive integer`);
  assert(limits.tokenHashesPerTenantMax >= 2, 'a rotation keeps the previous token through its grace period: at least two hashes');
}

checkMetaLimits(META_LIMITS);
