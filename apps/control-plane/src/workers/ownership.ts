/**
 * The ownership reconciler: a LeaderTask that makes every cell own the
 * namespaces the routing table gives it (docs/decisions/0005-cells-own-namespaces.md,
 * docs/decisions/0019-the-move-worker.md). A tenant is recorded in the meta
 * group first and claimed on its cell second; when the claim fails (the cell
 * had no leader) the tenant stays recorded, and this pass claims it once the
 * cell answers.
 *
 * Order matters: each cell's namespaces are read first, the routing table
 * after (behind a read barrier). A namespace a cell lacks at the first read
 * and the table routes to it, with no move of it unfinished at the second,
 * was never the cell's: a move leaves a tombstone where it moved from, and a
 * move to the cell imports before its route switches. So the claim can only
 * give the cell what the table says, never revive a namespace that moved on.
 * Namespaces with a tombstone, or being moved, are the move worker's.
 *
 * The same pass keeps each tenant's quotas on its cell
 * (docs/decisions/0020-tenant-quotas-and-rate-limits.md): where the cell
 * reports other quotas than the meta group's (a push that failed, a move, a
 * fresh claim), it sends them again. Quotas go to a cell only for a
 * namespace it holds and that is not moving, so they land after the claim or
 * the import, never on a frozen copy. Tenants' token hashes are kept the same
 * way (docs/decisions/0016-tenant-credentials-and-mtls.md): a move carries
 * them in its export, and this pass repairs a push that did not land.
 */
import type { Logger } from 'pino';
import type { Quotas, TokenHash } from '@fencer/meta-fsm';
import type { MetaStore } from '../meta-group.js';
import type { CellDirectory } from '../cells.js';
import type { LeaderTask } from './leader-loop.js';
import { cellQuotas, sameCellQuotas } from '../tenant-quotas.js';
import { cellCredentials, sameCellCredentials } from '../tenant-credentials.js';
import type { adminpb } from '@fencer/protocol';

export interface OwnershipDeps {
  readonly meta: MetaStore;
  readonly cells: Pick<CellDirectory, 'cellIds' | 'claim' | 'listNamespaces' | 'setQuotas' | 'setCredentials'>;
  readonly logger: Logger;
  readonly intervalMs?: number;
  /** Counts claims made by the reconciler. */
  readonly claimed?: (cell: string) => void;
  /** Counts quota pushes made by the reconciler. */
  readonly quotasSent?: (cell: string) => void;
  /** Counts token-hash pushes made by the reconciler. */
  readonly credentialsSent?: (cell: string) => void;
}

export const OWNERSHIP_TASK = 'ownership';

export function ownershipReconciler(deps: OwnershipDeps): LeaderTask {
  return {
    name: OWNERSHIP_TASK,
    intervalMs: deps.intervalMs ?? 2_000,
    async runPass(signal) {
      // First what each cell holds (a cell without a leader is skipped this pass)...
      const held = new Map<string, Map<string, adminpb.NamespaceEntry>>();
      await Promise.all(
        deps.cells.cellIds().map(async (cell) => {
          try {
            held.set(cell, new Map((await deps.cells.listNamespaces(cell)).map((n) => [n.namespace, n])));
          } catch (e) {
            deps.logger.debug({ cell, err: (e as Error).message }, 'ownership: cell did not answer; next pass');
          }
        }),
      );
      // ...then what the table says, read after.
      const state = await deps.meta.read();
      for (const route of state.routes()) {
        if (signal.aborted) return;
        const names = held.get(route.cell);
        if (names === undefined || state.isMoving(route.namespace)) continue;
        const entry = names.get(route.namespace);
        const tenant = state.tenant(route.namespace);
        if (entry === undefined) {
          if (await claim(deps, route.cell, route.namespace)) {
            await sendQuotas(deps, route.cell, route.namespace, undefined, tenant?.quotas);
            await sendCredentials(deps, route.cell, route.namespace, undefined, tenant?.tokenHashes);
          }
        } else if (entry.state === 'active') {
          await sendQuotas(deps, route.cell, route.namespace, entry.quotas, tenant?.quotas);
          await sendCredentials(deps, route.cell, route.namespace, entry.credentials, tenant?.tokenHashes);
        }
      }
    },
  };
}

async function claim(deps: OwnershipDeps, cell: string, namespace: string): Promise<boolean> {
  try {
    await deps.cells.claim(cell, namespace);
    deps.claimed?.(cell);
    deps.logger.info({ cell, namespace }, 'ownership: claimed a namespace its cell lacked');
    return true;
  } catch (e) {
    deps.logger.warn({ cell, namespace, err: (e as Error).message }, 'ownership: claim failed');
    return false;
  }
}

/** Sends the meta group's quotas when the cell reported others (`has`; undefined: none, as after a claim). */
async function sendQuotas(
  deps: OwnershipDeps,
  cell: string,
  namespace: string,
  has: adminpb.NamespaceQuotas | undefined,
  recorded: Quotas | undefined,
): Promise<void> {
  if (recorded === undefined) return;
  const wanted = cellQuotas(recorded);
  if (sameCellQuotas(has, wanted)) return;
  try {
    await deps.cells.setQuotas(cell, namespace, wanted);
    deps.quotasSent?.(cell);
    deps.logger.info({ cell, namespace, quotas: wanted }, 'ownership: sent a tenant its quotas');
  } catch (e) {
    deps.logger.warn({ cell, namespace, err: (e as Error).message }, 'ownership: quotas not taken; next pass');
  }
}

/** Sends the meta group's token hashes when the cell reported others (`has`; undefined: none, as after a claim). */
async function sendCredentials(
  deps: OwnershipDeps,
  cell: string,
  namespace: string,
  has: readonly adminpb.CredentialHash[] | undefined,
  recorded: readonly TokenHash[] | undefined,
): Promise<void> {
  if (recorded === undefined) return;
  const wanted = cellCredentials(recorded);
  if (sameCellCredentials(has, wanted)) return;
  try {
    await deps.cells.setCredentials(cell, namespace, wanted);
    deps.credentialsSent?.(cell);
    deps.logger.info({ cell, namespace, hashes: wanted.length }, 'ownership: sent a tenant its token hashes');
  } catch (e) {
    deps.logger.warn({ cell, namespace, err: (e as Error).message }, 'ownership: token hashes not taken; next pass');
  }
}
