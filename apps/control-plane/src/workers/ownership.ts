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
 */
import type { Logger } from 'pino';
import type { MetaStore } from '../meta-group.js';
import type { CellDirectory } from '../cells.js';
import type { LeaderTask } from './leader-loop.js';

export interface OwnershipDeps {
  readonly meta: MetaStore;
  readonly cells: Pick<CellDirectory, 'cellIds' | 'claim' | 'listNamespaces'>;
  readonly logger: Logger;
  readonly intervalMs?: number;
  /** Counts claims made by the reconciler. */
  readonly claimed?: (cell: string) => void;
}

export const OWNERSHIP_TASK = 'ownership';

export function ownershipReconciler(deps: OwnershipDeps): LeaderTask {
  return {
    name: OWNERSHIP_TASK,
    intervalMs: deps.intervalMs ?? 2_000,
    async runPass(signal) {
      // First what each cell holds (a cell without a leader is skipped this pass)...
      const held = new Map<string, Set<string>>();
      await Promise.all(
        deps.cells.cellIds().map(async (cell) => {
          try {
            held.set(cell, new Set((await deps.cells.listNamespaces(cell)).map((n) => n.namespace)));
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
        if (names === undefined || names.has(route.namespace) || state.isMoving(route.namespace)) continue;
        try {
          await deps.cells.claim(route.cell, route.namespace);
          deps.claimed?.(route.cell);
          deps.logger.info({ cell: route.cell, namespace: route.namespace }, 'ownership: claimed a namespace its cell lacked');
        } catch (e) {
          deps.logger.warn({ cell: route.cell, namespace: route.namespace, err: (e as Error).message }, 'ownership: claim failed');
        }
      }
    },
  };
}
