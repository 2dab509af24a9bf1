/**
 * What every resource plugin is registered with: the meta group, the cells,
 * the one writer (idempotency.ts) and the sources of time, ids and tokens
 * (injected so tests are deterministic).
 */
import type { CellDirectory } from '../cells.js';
import type { MetaWrite } from '../http/idempotency.js';
import type { MetaStore } from '../meta-group.js';
import { ProblemError } from '../problems.js';

// A type alias, not an interface: fastify's plugin options must be assignable to an index signature.
export type RouteContext = {
  readonly meta: MetaStore;
  readonly cells: CellDirectory;
  /** Auth on: tenant creations and rotations mint tokens. Absent: auth off. */
  readonly adminToken: string | undefined;
  readonly frontEndToken?: string | undefined;
  readonly write: MetaWrite;
  readonly wallMs: () => number;
  readonly newId: () => string;
  readonly newTenantToken: () => string;
  /** Starts a leader task's next pass now, after a write that journaled work for it ('moves', 'snapshots'; a no-op off the leader). */
  readonly wake: (task: string) => void;
};

export function cellMustExist(cells: CellDirectory, cell: string): void {
  if (!cells.has(cell)) throw new ProblemError('CELL_NOT_FOUND', `no cell "${cell}"; known cells: ${cells.cellIds().join(', ') || 'none'}`);
}
