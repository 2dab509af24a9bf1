/**
 * What a replica notes about tenant moves that is not replicated state
 * (docs/decisions/0019-the-move-worker.md): the waits a move carries in
 * (what was left of each on the old cell, handed to this node with the
 * import, for the leader's deadlines), and, after a namespace unfreezes, how
 * long until its first write was served here: the end of the move's
 * unavailability. Bounded; callbacks only, no clock of its own.
 */
import { assert } from '@fencer/base';
import type { Failure, LockStateMachine, MoveFence } from '@fencer/lock-fsm';

/** Namespaces whose carried waits this node keeps at once (one import each; imports are rare and admin-driven). */
export const CARRIED_WAITS_MAX = 16;
/** Namespaces whose unfreeze this node remembers (the oldest are forgotten first). */
export const UNFREEZES_REMEMBERED_MAX = 1024;

interface Unfreeze {
  readonly atMonoMs: number;
  /** Ms from the unfreeze to the first write served in the namespace; undefined while none was. */
  firstWriteAfterMs: number | undefined;
}

export interface UnfreezeView {
  /** Ms since the namespace unfroze here. */
  readonly unfrozenAgoMs: number;
  /** Ms from the unfreeze to its first write; undefined while no write was served yet. */
  readonly firstWriteAfterMs: number | undefined;
}

export class NamespaceMoves {
  private readonly carried = new Map<string, ReadonlyMap<string, number>>();
  private readonly unfreezes = new Map<string, Unfreeze>();
  /** Unfreezes still waiting for their first write: the apply stream looks at writes only while this is above 0. */
  private awaitingWrite = 0;
  /**
   * Namespaces imported here (frozen) and not unfrozen or dropped since, as
   * this replica applied them: the move's target. Their leases are this
   * cell's to extend; a namespace frozen here otherwise is a move's source,
   * whose export may be taken already, and extends none. Bounded by the
   * namespaces a cell holds.
   */
  private readonly importedFrozen = new Set<string>();

  /** `namespace` was imported here, frozen. */
  importedHere(namespace: string): void {
    this.importedFrozen.add(namespace);
  }

  /** `namespace` was dropped here, or this replica's state was replaced by a snapshot (all = true). */
  forgetImport(namespace: string | null): void {
    if (namespace === null) this.importedFrozen.clear();
    else this.importedFrozen.delete(namespace);
  }

  /** May a frozen `namespace` extend leases here? Only as a move's target, between its import and its unfreeze. */
  frozenKeepsLeases(namespace: string): boolean {
    return this.importedFrozen.has(namespace);
  }

  /** The waits an import of `namespace` will carry: key (session, request id) → ms left on the old cell. */
  carryWaits(namespace: string, remainingMs: ReadonlyMap<string, number>): void {
    this.carried.delete(namespace);
    if (this.carried.size >= CARRIED_WAITS_MAX) this.carried.delete(this.carried.keys().next().value as string);
    this.carried.set(namespace, remainingMs);
  }

  /** The carried waits of `namespace`, once (the import applied). */
  takeCarriedWaits(namespace: string): ReadonlyMap<string, number> | undefined {
    const m = this.carried.get(namespace);
    this.carried.delete(namespace);
    return m;
  }

  unfrozen(namespace: string, nowMonoMs: number): void {
    this.importedFrozen.delete(namespace);
    const old = this.unfreezes.get(namespace);
    if (old !== undefined && old.firstWriteAfterMs === undefined) this.awaitingWrite--;
    this.unfreezes.delete(namespace);
    if (this.unfreezes.size >= UNFREEZES_REMEMBERED_MAX) {
      const [oldest, u] = this.unfreezes.entries().next().value as [string, Unfreeze];
      if (u.firstWriteAfterMs === undefined) this.awaitingWrite--;
      this.unfreezes.delete(oldest);
    }
    this.unfreezes.set(namespace, { atMonoMs: nowMonoMs, firstWriteAfterMs: undefined });
    this.awaitingWrite++;
  }

  get awaitingFirstWrite(): boolean {
    return this.awaitingWrite > 0;
  }

  /** A client write in `namespace` was applied here. */
  wrote(namespace: string, nowMonoMs: number): void {
    const u = this.unfreezes.get(namespace);
    if (u === undefined || u.firstWriteAfterMs !== undefined) return;
    u.firstWriteAfterMs = Math.max(0, nowMonoMs - u.atMonoMs);
    this.awaitingWrite--;
    assert(this.awaitingWrite >= 0, 'each unfreeze waits for one first write');
  }

  unfreeze(namespace: string, nowMonoMs: number): UnfreezeView | undefined {
    const u = this.unfreezes.get(namespace);
    return u === undefined ? undefined : { unfrozenAgoMs: Math.max(0, nowMonoMs - u.atMonoMs), firstWriteAfterMs: u.firstWriteAfterMs };
  }
}

/**
 * Whether a move's import of `namespace` is done here already: the counts of
 * the copy this cell holds when an earlier attempt of the same move imported
 * it (its source stayed frozen, so it is the same export); undefined when the
 * cell holds none and the import should run. Refused when `fence` is older
 * than the namespace's here (a deposed leader's step), or the copy held was
 * left by another move (its fence names another move id): that copy may be
 * older than the source's state now, and is dropped before a move imports.
 * Without a fence (an operator's import), any copy held counts as done.
 */
export function heldImport(
  fsm: LockStateMachine,
  namespace: string,
  fence: MoveFence | undefined,
): { readonly sessions: number; readonly locks: number } | Failure | undefined {
  const refused = fence === undefined ? undefined : fsm.moveFenceRefusal(namespace, fence);
  if (refused !== undefined) return refused;
  const info = fsm.namespaceInfo(namespace);
  if (info === undefined || info.state === 'moved') return undefined;
  const seen = fsm.moveFence(namespace);
  if (fence !== undefined && seen?.moveId !== fence.moveId) {
    const whose = seen === undefined ? 'no move' : `move ${seen.moveId} (meta term ${seen.term})`;
    return {
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: `this cell holds namespace "${namespace}" (${info.state}) from ${whose}, not from move ${fence.moveId}; drop it before importing`,
    };
  }
  return { sessions: info.sessions, locks: info.locks };
}
