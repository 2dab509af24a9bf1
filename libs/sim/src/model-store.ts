/**
 * A model of a durable Raft log store, at the level of whole calls: each
 * save becomes durable when its simulated fsync completes, in call order;
 * a crash keeps what was durable plus, at random, a prefix of what was in
 * flight (a write may land before the power goes). It stands in for
 * `@fencer/wal`'s store when a test wants Raft-level faults only, and
 * checks the replica against the interface's contract rather than one
 * implementation of it.
 */
import { type LogIndex, type Random, type Term, assert, LogIndex as toIndex, Term as toTerm } from '@fencer/base';
import type { ConfState, Entry, HardState, Snapshot } from '@fencer/raft';
import type { Done, RaftLogStore } from '@fencer/wal';

interface LogState {
  hardState: HardState;
  snapshot: Snapshot;
  /** entries[i].index === snapshot.meta.index + 1 + i */
  entries: Entry[];
}

type Op = { kind: 'save'; hardState: HardState | undefined; entries: readonly Entry[] } | { kind: 'snapshot'; snapshot: Snapshot };

const emptyConf: ConfState = { voters: [], learners: [] };

function emptyState(): LogState {
  return {
    hardState: { term: toTerm(0), vote: null, commit: toIndex(0) },
    snapshot: { meta: { index: toIndex(0), term: toTerm(0), conf: emptyConf }, data: new Uint8Array(0) },
    entries: [],
  };
}

function clone(s: LogState): LogState {
  return { hardState: s.hardState, snapshot: s.snapshot, entries: [...s.entries] };
}

function applyOp(s: LogState, op: Op): void {
  if (op.kind === 'save') {
    if (op.hardState !== undefined) s.hardState = op.hardState;
    if (op.entries.length === 0) return;
    const base = s.snapshot.meta.index;
    const first = (op.entries[0] as Entry).index;
    const last = base + s.entries.length;
    assert(first <= last + 1, `append at ${first} leaves a gap after ${last}`);
    let skip = 0;
    if (first <= base) skip = base + 1 - first; // Already covered by the snapshot.
    if (skip >= op.entries.length) return;
    s.entries.length = Math.max(0, first + skip - base - 1);
    for (let i = skip; i < op.entries.length; i++) s.entries.push(op.entries[i] as Entry);
    return;
  }
  const { index, term } = op.snapshot.meta;
  const base = s.snapshot.meta.index;
  if (index <= base) return;
  const last = base + s.entries.length;
  const keep = index <= last && (s.entries[index - base - 1] as Entry).term === term;
  s.entries = keep ? s.entries.slice(index - base) : [];
  s.snapshot = op.snapshot;
  if (s.hardState.commit < index) s.hardState = { ...s.hardState, commit: index };
}

/** The "disk": what survives a crash. */
export class ModelDisk {
  durable: LogState = emptyState();
  /** Calls issued and not yet durable, in order. */
  inflight: Op[] = [];
  epoch = 0;
  failNextSync = false;

  constructor(
    private readonly schedule: (delayMs: number, fn: () => void) => void,
    private readonly fsyncMs: () => number,
  ) {}

  open(done: (err: Error | null, store?: RaftLogStore) => void): void {
    const epoch = this.epoch;
    this.schedule(0.05, () => {
      if (epoch === this.epoch) done(null, new ModelLogStore(this, clone(this.durable)));
    });
  }

  crash(random: Random): void {
    this.epoch++;
    const landed = random.int(this.inflight.length + 1);
    for (const op of this.inflight.slice(0, landed)) applyOp(this.durable, op);
    this.inflight = [];
    this.failNextSync = false;
  }

  /** @internal */
  issue(op: Op, done: Done): void {
    this.inflight.push(op);
    const epoch = this.epoch;
    const fail = this.failNextSync;
    this.failNextSync = false;
    this.schedule(this.fsyncMs(), () => {
      if (epoch !== this.epoch) return;
      const at = this.inflight.indexOf(op);
      assert(at === 0, 'model disk completes calls in order');
      this.inflight.shift();
      if (fail) return done(new Error('EIO: fsync failed'));
      applyOp(this.durable, op);
      done(null);
    });
  }
}

export class ModelLogStore implements RaftLogStore {
  private closed = false;

  constructor(
    private readonly disk: ModelDisk,
    private readonly state: LogState,
  ) {}

  initialState(): { hardState: HardState; conf: ConfState } {
    return { hardState: this.state.hardState, conf: this.state.snapshot.meta.conf };
  }

  entries(lo: LogIndex, hi: LogIndex, maxBytes: number): Entry[] {
    const base = this.state.snapshot.meta.index;
    assert(lo > base && hi <= this.lastIndex() + 1 && lo <= hi, `entries(${lo}, ${hi}) outside (${base}, ${this.lastIndex()}]`);
    const out: Entry[] = [];
    let bytes = 0;
    for (let i = lo; i < hi; i++) {
      const e = this.state.entries[i - base - 1] as Entry;
      bytes += e.data.byteLength;
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  term(index: LogIndex): Term {
    const base = this.state.snapshot.meta.index;
    if (index === base) return this.state.snapshot.meta.term;
    assert(index > base && index <= this.lastIndex(), `term(${index}) outside [${base}, ${this.lastIndex()}]`);
    return (this.state.entries[index - base - 1] as Entry).term;
  }

  firstIndex(): LogIndex {
    return toIndex(this.state.snapshot.meta.index + 1);
  }

  lastIndex(): LogIndex {
    return toIndex(this.state.snapshot.meta.index + this.state.entries.length);
  }

  snapshot(): Snapshot {
    return this.state.snapshot;
  }

  save(hardState: HardState | undefined, entries: readonly Entry[], done: Done): void {
    assert(!this.closed, 'save after close');
    const op: Op = { kind: 'save', hardState, entries: [...entries] };
    applyOp(this.state, op);
    this.disk.issue(op, done);
  }

  saveSnapshot(snapshot: Snapshot, done: Done): void {
    assert(!this.closed, 'saveSnapshot after close');
    const op: Op = { kind: 'snapshot', snapshot };
    applyOp(this.state, op);
    this.disk.issue(op, done);
  }

  close(done: Done): void {
    this.closed = true;
    done(null);
  }
}
