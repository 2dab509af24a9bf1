/**
 * Fences of a tenant move's cell steps (docs/decisions/0019-the-move-worker.md).
 *
 * Every step the control plane's move worker takes on a cell (freeze,
 * unfreeze, the import's pieces, drop; the export, which is a read, is
 * checked too) carries the move's id, the meta group's term of the leader
 * that decided it, and the meta log index of the journal entry it was
 * decided from (the one that put the move in its current state). The cell
 * keeps, per namespace, the highest fence any step carried, in its
 * replicated state (snapshots and namespace exports carry it), and refuses a
 * step whose fence is below it with MOVE_FENCED.
 *
 * Order: by term, then by journal index. Terms only grow and a term has one
 * leader, so once a cell applied a step of a leader of term T for a
 * namespace, no step decided by a deposed leader (term < T) acts on that
 * namespace there again, whatever it still believes. Within one term the
 * journal index orders that leader's own steps: a namespace's moves run one
 * after another and each state of a move is a later journal entry, so a step
 * decided from an earlier state (a call that arrived late: held in a paused
 * replica's socket, say) never undoes one decided from a later state, of the
 * same move or of the next.
 */
import { AssertionError } from '@fencer/base';
import { type ByteReader, type ByteWriter, DecodeError } from './codec.js';
import type { Failure } from './types.js';
import { fail } from './validate.js';

/** The move and the meta term a cell step was decided under. */
export interface MoveFence {
  /** The meta group's term of the leader that runs the step (≥ 1). */
  readonly term: number;
  /** The meta log index of the journal entry that put the move in the state the step was decided from. */
  readonly journalIndex: number;
  /** The move's id as journaled (1..MOVE_ID_CHARS_MAX printable ASCII characters): for messages and the import's check. */
  readonly moveId: string;
}

/** Longest move id a fence carries. */
export const MOVE_ID_CHARS_MAX = 128;

const MOVE_ID_PATTERN = /^[\x21-\x7e]+$/;

/** Stateless checks of a fence's fields. */
export function checkMoveFence(fence: MoveFence): Failure | undefined {
  if (!Number.isSafeInteger(fence.term) || fence.term < 1)
    return fail('INVALID_ARGUMENT', `a move fence's term is a positive integer (the meta leader's term), got ${fence.term}`);
  if (!Number.isSafeInteger(fence.journalIndex) || fence.journalIndex < 0)
    return fail('INVALID_ARGUMENT', `a move fence's journal index is a non-negative integer, got ${fence.journalIndex}`);
  if (typeof fence.moveId !== 'string' || fence.moveId.length > MOVE_ID_CHARS_MAX || !MOVE_ID_PATTERN.test(fence.moveId))
    return fail('INVALID_ARGUMENT', `a move fence's move id is 1 to ${MOVE_ID_CHARS_MAX} printable ASCII characters`);
  return undefined;
}

export function writeFence(w: ByteWriter, fence: MoveFence): void {
  w.varuint(fence.term).varuint(fence.journalIndex).string(fence.moveId);
}

/** Reads a fence; a malformed one is a DecodeError. */
export function readFence(r: ByteReader): MoveFence {
  const fence = { term: r.varuint(), journalIndex: r.varuint(), moveId: r.string() };
  const bad = checkMoveFence(fence);
  if (bad !== undefined) throw new DecodeError(bad.message);
  return fence;
}

/** A fence's words for a message. */
function described(fence: MoveFence): string {
  return `move ${fence.moveId} (meta term ${fence.term}, journal index ${fence.journalIndex})`;
}

/** Negative when `a` is older than `b`, 0 when they order the same, positive when newer. */
export function compareFences(a: MoveFence, b: MoveFence): number {
  return a.term !== b.term ? a.term - b.term : a.journalIndex - b.journalIndex;
}

/** The highest fence each namespace's move steps carried here. Deterministic: the same entries give the same table. */
export class MoveFences {
  private readonly byNamespace = new Map<string, MoveFence>();

  constructor(private readonly entriesMax: number) {}

  get size(): number {
    return this.byNamespace.size;
  }

  get(namespace: string): MoveFence | undefined {
    return this.byNamespace.get(namespace);
  }

  /** Undefined when a step carrying `fence` may act on `namespace`; else why not (MOVE_FENCED, or the table is full). */
  refusal(namespace: string, fence: MoveFence): Failure | undefined {
    const seen = this.byNamespace.get(namespace);
    if (seen === undefined) {
      if (this.byNamespace.size >= this.entriesMax)
        return fail('QUOTA_EXCEEDED', `this cell keeps move fences for ${this.entriesMax} namespaces at most`);
      return undefined;
    }
    if (compareFences(fence, seen) >= 0) return undefined;
    return fail(
      'MOVE_FENCED',
      `a step of ${described(fence)} on namespace "${namespace}" is refused: this cell already applied a step of ${described(seen)}; ` +
        'it was decided by a meta leader since deposed, or from a journal state since left behind (the current leader carries the move on)',
    );
  }

  /** Records `fence` as the namespace's: call only after `refusal` said yes. */
  record(namespace: string, fence: MoveFence): void {
    const seen = this.byNamespace.get(namespace);
    if (seen !== undefined && compareFences(fence, seen) < 0) throw new AssertionError(`fence of ${namespace} would go back`);
    if (seen === undefined || compareFences(fence, seen) > 0) this.byNamespace.set(namespace, fence);
  }

  /** Raises the namespace's fence to `fence` if that is newer (an import learning its export's fence). */
  raiseTo(namespace: string, fence: MoveFence): void {
    const seen = this.byNamespace.get(namespace);
    if (seen === undefined || compareFences(fence, seen) > 0) this.byNamespace.set(namespace, fence);
  }

  /** Every fence, for snapshots (in any order: the encoder sorts). */
  entries(): ReadonlyMap<string, MoveFence> {
    return this.byNamespace;
  }

  /** Replaces the table with `fences` (a restore). */
  load(fences: ReadonlyMap<string, MoveFence>): void {
    this.byNamespace.clear();
    for (const [ns, f] of fences) this.byNamespace.set(ns, f);
  }
}
