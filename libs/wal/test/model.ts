/**
 * A reference model for the WAL property tests: the state Raft's storage
 * should show after each issued operation, and a check that a recovered
 * store equals one of them.
 */
import { LogIndex, NodeId, Term } from '@fencer/base';
import type { Entry, HardState, Snapshot } from '@fencer/raft';
import type { WalStore } from '../src/index.js';
import { allEntries, text } from './helpers.js';

export interface ModelState {
  /** terms[i], data[i]: entry i; undefined below a snapshot that replaced the log. */
  readonly terms: ReadonlyArray<number | undefined>;
  readonly data: ReadonlyArray<string | undefined>;
  readonly last: number;
  readonly hs: HardState;
  /** first index - 1 of the read view. */
  readonly snapIndex: number;
}

export const emptyModel: ModelState = {
  terms: [0],
  data: [''],
  last: 0,
  hs: { term: Term(0), vote: null, commit: LogIndex(0) },
  snapIndex: 0,
};

export function applySave(s: ModelState, hs: HardState | undefined, entries: readonly Entry[]): ModelState {
  const terms = s.terms.slice();
  const data = s.data.slice();
  let last = s.last;
  if (entries.length > 0) {
    last = entries[0]!.index - 1;
    terms.length = last + 1;
    data.length = last + 1;
    for (const e of entries) {
      terms.push(e.term);
      data.push(text(e));
      last++;
    }
  }
  return { terms, data, last, hs: hs ?? s.hs, snapIndex: s.snapIndex };
}

export function applySnapshot(s: ModelState, snap: Snapshot): ModelState {
  const at = snap.meta.index;
  if (at <= s.snapIndex) return s;
  const matches = at <= s.last && s.terms[at] === snap.meta.term;
  if (matches) return { ...s, snapIndex: at };
  const terms: Array<number | undefined> = new Array(at + 1).fill(undefined);
  terms[at] = snap.meta.term;
  // A snapshot holds committed entries only, so recovery takes its index as a commit index.
  const hs = s.hs.commit >= at ? s.hs : { ...s.hs, commit: LogIndex(at) };
  return { terms, data: new Array(at + 1).fill(undefined), last: at, hs, snapIndex: at };
}

/** Why `store` differs from `s`, or null when it equals it. */
export function mismatch(s: ModelState, store: WalStore, snapshots: ReadonlyMap<number, string>): string | null {
  if (store.lastIndex() !== s.last) return `lastIndex ${store.lastIndex()} != ${s.last}`;
  const h = store.initialState().hardState;
  if (h.term !== s.hs.term || h.vote !== s.hs.vote || h.commit !== s.hs.commit)
    return `hard state ${JSON.stringify(h)} != ${JSON.stringify(s.hs)}`;
  const first = store.firstIndex();
  const snap = store.snapshot();
  if (snap.meta.index !== first - 1) return 'snapshot index is not firstIndex - 1';
  if (snap.meta.index > 0) {
    const want = snapshots.get(snap.meta.index);
    if (want === undefined || String.fromCharCode(...snap.data) !== want) return `snapshot at ${snap.meta.index} has unexpected data`;
  }
  const t = s.terms[first - 1];
  if (t !== undefined && store.term(LogIndex(first - 1)) !== t) return `term(${first - 1}) ${store.term(LogIndex(first - 1))} != ${t}`;
  for (const e of allEntries(store)) {
    if (s.terms[e.index] !== e.term || s.data[e.index] !== text(e))
      return `entry ${e.index} is ${e.term}/${text(e)}, model has ${s.terms[e.index]}/${s.data[e.index]}`;
  }
  return null;
}

export const voters = [NodeId('a'), NodeId('b'), NodeId('c')];
