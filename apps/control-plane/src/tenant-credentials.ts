/**
 * A tenant's token hashes on its cell (docs/decisions/0016-tenant-credentials-and-mtls.md).
 * The meta group records them (the current hash, and those of rotated-out
 * tokens until their grace period ends); the owning cell checks every
 * lock-service call against them, so the control plane sends them there:
 * when the tenant is created, when its token is rotated, and from the
 * ownership reconciler whenever the cell reports others (after a failed push,
 * a move, a claim). A push on rotation is what makes a revoked token refused
 * within a few seconds, not a pass of the reconciler.
 */
import type { adminpb } from '@fencer/protocol';
import type { Tenant, TokenHash } from '@fencer/meta-fsm';
import type { CellDirectory } from './cells.js';

/** The meta group's hashes as a cell holds them: no expiry is 0. */
export function cellCredentials(hashes: readonly TokenHash[]): adminpb.CredentialHash[] {
  return hashes.map((t) => ({ hash: t.hash, validUntilMs: t.validUntilMs ?? 0 }));
}

export function sameCellCredentials(a: readonly adminpb.CredentialHash[] | undefined, b: readonly adminpb.CredentialHash[]): boolean {
  const x = a ?? [];
  return x.length === b.length && x.every((c, i) => c.hash === b[i]!.hash && c.validUntilMs === b[i]!.validUntilMs);
}

/**
 * Sends the tenant's hashes to its cell. False when the cell did not take
 * them now (no leader, the namespace frozen for a move, not claimed yet):
 * the ownership reconciler sends them again on its next pass, so a caller
 * only logs and wakes it.
 */
export async function pushCredentials(
  cells: Pick<CellDirectory, 'setCredentials'>,
  tenant: Tenant,
  logger?: { warn(obj: object, msg: string): void },
): Promise<boolean> {
  try {
    await cells.setCredentials(tenant.cell, tenant.namespace, cellCredentials(tenant.tokenHashes));
    return true;
  } catch (e) {
    logger?.warn(
      { cell: tenant.cell, namespace: tenant.namespace, err: (e as Error).message },
      'token hashes not on the cell yet; the reconciler retries',
    );
    return false;
  }
}
