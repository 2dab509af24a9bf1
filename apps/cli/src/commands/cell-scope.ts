/**
 * `--cell ID` on every `fencer cell` command. The admin endpoints (--admin,
 * FENCER_ADMIN_ENDPOINTS or the fleet description) may span several cells:
 * the fleet description names each replica's cell, and a replica given by
 * address alone says its cell in its Status answer. A command that changes
 * a cell must be scoped to one: --cell picks it, and without --cell the
 * endpoints must all be of one cell, else the command refuses with the list
 * of cells (it would otherwise act on whichever leader it met first).
 */
import { UsageError } from '../config.js';
import type { AdminReplica } from './cell-admin.js';
import { adminCall, statusTimeoutMs } from './cell-admin.js';
import type { adminpb } from '@fencer/protocol';
import type { ChannelCredentials } from '@grpc/grpc-js';

export interface CellReplica extends AdminReplica {
  /** '' while unknown: given by address only, and not answering. */
  readonly cellId: string;
}

/** Each replica's cell: the fleet description's, else the one its Status names; unreachable unknowns stay ''. */
export async function learnCells(replicas: readonly CellReplica[], timeoutMs: number, creds: ChannelCredentials): Promise<CellReplica[]> {
  return Promise.all(
    replicas.map(async (r) => {
      if (r.cellId !== '') return r;
      const s = await adminCall<adminpb.StatusResponse>(r.admin, 'status', {}, Math.min(timeoutMs, statusTimeoutMs), creds).catch(
        () => undefined,
      );
      return s?.cellId ? { ...r, cellId: s.cellId } : r;
    }),
  );
}

/** The distinct known cells, in the order the replicas list them. */
export function cellsOf(replicas: readonly { cellId: string }[]): string[] {
  return [...new Set(replicas.map((r) => r.cellId).filter((c) => c !== ''))];
}

/** The replicas of `cell`; a cell no replica belongs to is a usage error naming the cells there are. */
export function replicasOfCell<R extends { cellId: string }>(replicas: readonly R[], cell: string): R[] {
  const chosen = replicas.filter((r) => r.cellId === cell);
  if (chosen.length === 0) {
    const known = cellsOf(replicas);
    throw new UsageError(
      `no replica of cell ${cell} among the admin endpoints${known.length ? ` (their cells: ${known.join(', ')})` : ' (none answered to say its cell)'}`,
    );
  }
  return chosen;
}

/**
 * The replicas a change applies to: those of --cell, else all of them when they are of one cell; endpoints that span
 * several cells without --cell are refused, naming the cells.
 */
export async function scopeForChange(
  replicas: readonly CellReplica[],
  cell: string | undefined,
  timeoutMs: number,
  creds: ChannelCredentials,
): Promise<CellReplica[]> {
  const known = await learnCells(replicas, timeoutMs, creds);
  if (cell !== undefined) return replicasOfCell(known, cell);
  const cells = cellsOf(known);
  if (cells.length > 1) throw new UsageError(`the admin endpoints span cells ${cells.join(', ')}: name the one to change with --cell ID`);
  return known;
}
