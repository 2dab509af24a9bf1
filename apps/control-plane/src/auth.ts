/**
 * Credentials: the admin token (generated at first start, written mode 0600)
 * and tenant tokens, which the meta group stores only as hashes.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import type { Tenant } from '@fencer/meta-fsm';

export function newToken(kind: 'admin' | 'tenant' | 'frontend'): string {
  return `fencer_${kind}_${randomBytes(32).toString('base64url')}`;
}

/** The form a tenant token is stored in. */
export function hashToken(token: string): string {
  return `sha256:${createHash('sha256').update(token).digest('hex')}`;
}

/** Compares two secrets in time independent of where they differ. */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/** The token is one of the tenant's, and not past its grace period. */
export function tenantTokenValid(tenant: Tenant, token: string, nowWallMs: number): boolean {
  const hash = hashToken(token);
  return tenant.tokenHashes.some((t) => sameSecret(t.hash, hash) && (t.validUntilMs === undefined || t.validUntilMs > nowWallMs));
}

/** The admin token in `file`, created (mode 0600, never overwritten) when it does not exist yet. */
export function loadOrCreateAdminToken(file: string, kind: 'admin' | 'frontend' = 'admin'): string {
  try {
    writeFileSync(file, `${newToken(kind)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const token = readFileSync(file, 'utf8').trim();
  if (token === '') throw new Error(`${file} is empty: delete it to have a new admin token generated`);
  return token;
}

/** The front ends' token in `file` (beside the admin token: front-end-token), made like the admin token's file. */
export function loadOrCreateFrontEndToken(file: string): string {
  return loadOrCreateAdminToken(file, 'frontend');
}

/** The bearer token of an Authorization header, or undefined. */
export function bearerOf(header: string | undefined): string | undefined {
  const m = /^Bearer ([\x21-\x7e]{1,512})$/.exec(header ?? '');
  return m?.[1];
}
