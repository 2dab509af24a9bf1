/**
 * Goal: any sequence of appends, suffix truncations,
 * snapshots and compactions, then a crash at any point between two disk
 * operations, with unsynced writes and directory changes lost or (in random
 * mode) partly kept with the first lost write torn, recovers to a prefix of
 * what was issued that contains everything acknowledged; never to garbage.
 * And a single flipped bit anywhere in a written record is detected: the
 * store either refuses to open or recovers a state without that record.
 *
 * Method: fast-check generates operation lists; a reference model records
 * the state after each issued operation; MemDisk completes disk operations
 * only when a `drain` step runs some of them, so saves pile up into group
 * commits and crashes strike mid-flight; crashes may also persist unsynced
 * writes out of order, as a disk flushing a later fsync's pages first does.
 * After each crash the recovered store must equal some model state at or
 * after the last acknowledged one. Scenarios run with one to three fsyncs
 * in flight.
 */
import { LogIndex, NodeId, SeededRandom, Term } from '@fencer/base';
import type { Entry, HardState, Snapshot } from '@fencer/raft';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemDisk, type WalOptions, type WalStore, WalCorruptionError, openRaftLogStore } from '../src/index.js';
import { DIR, entry } from './helpers.js';
import { readRecord } from '../src/records.js';
import { type ModelState, applySave, applySnapshot, emptyModel, mismatch, voters } from './model.js';

const OPTIONS: WalOptions = { segmentBytesMax: 4096, snapshotsKept: 2 };
/** Scenarios alternate between one, two and three fsyncs in flight. */
let options: WalOptions = OPTIONS;

type Op =
  | { k: 'append'; n: number; size: number; bumpTerm: boolean; commit: number; vote: boolean; chain: boolean }
  | { k: 'truncate'; at: number; n: number }
  | { k: 'snapshot'; at: number }
  | { k: 'replace'; gap: number }
  | { k: 'drain'; n: number }
  | { k: 'crash'; random: boolean; reorder: boolean; seed: number; duringOpen: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      k: fc.constant('append' as const),
      n: fc.integer({ min: 1, max: 6 }),
      size: fc.integer({ min: 0, max: 700 }),
      bumpTerm: fc.boolean(),
      commit: fc.double({ min: 0, max: 1, noNaN: true }),
      vote: fc.boolean(),
      chain: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('truncate' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      n: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('snapshot' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('replace' as const), gap: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('drain' as const), n: fc.integer({ min: 0, max: 80 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('crash' as const),
      random: fc.boolean(),
      reorder: fc.boolean(),
      seed: fc.nat(),
      duringOpen: fc.integer({ min: 0, max: 3 }),
    }),
  },
);

function payload(index: number, term: number, size: number): string {
  return `${index}/${term}/`.padEnd(size, String.fromCharCode(97 + ((index * 7 + term) % 26)));
}

/** Opens the store, first crashing `crashesDuringOpen` times part-way through opening. */
function reopen(disk: MemDisk, random: SeededRandom, crashesDuringOpen: number): WalStore {
  for (let c = 0; c < crashesDuringOpen; c++) {
    openRaftLogStore(disk, DIR, options, () => {});
    disk.runSome(random.int(8));
    disk.crash({ mode: 'random', random });
  }
  let result: { err: Error | null; store?: WalStore } | undefined;
  openRaftLogStore(disk, DIR, options, (err, store) => (result = { err, store }));
  disk.runPending();
  if (result === undefined) throw new Error('open did not finish');
  if (result.err !== null) throw result.err;
  if (process.env.WAL_DEBUG) {
    console.log(JSON.stringify(result.store!.recovery), result.store!.firstIndex(), result.store!.lastIndex(), disk.list(DIR));
    for (const n of disk.list(DIR).filter((x) => x.endsWith('.wal'))) {
      const buf = disk.read(`${DIR}/${n}`);
      const out: string[] = [];
      let at = 0;
      for (;;) {
        const r = readRecord(buf, at, null, buf.length);
        if (!r.ok) {
          out.push(`END@${at}:${r.reason}`);
          break;
        }
        const kind = r.kind;
        out.push(
          kind === 3
            ? `E${buf[r.payloadStart]}t${buf[r.payloadStart + 8]}`
            : kind === 4
              ? `H${buf[r.payloadStart]}c${buf[r.payloadStart + 8]}`
              : `K${kind}`,
        );
        at = r.end;
      }
      console.log(n, out.join(' '));
    }
  }
  return result.store!;
}

/** What the scenarios exercised, so the test fails if generation stops reaching the interesting paths. */
const coverage = { crashes: 0, rolls: 0, segmentsDeleted: 0, tornTails: 0, laterCycleLanded: 0, replaced: 0, partialAcks: 0 };

/** Runs one operation list, checking after every crash. */
function runScenario(ops: readonly Op[]): void {
  options = { ...OPTIONS, syncsInFlightMax: 1 + (ops.length % 3) };
  const disk = new MemDisk();
  const random = new SeededRandom(ops.length);
  let store = reopen(disk, random, 0);
  // states[j]: what the store must show after issued operation j; states[0] is the recovered start.
  let states: ModelState[] = [emptyModel];
  let acked = 0;
  const snapshots = new Map<number, string>();
  const tally = (): void => {
    coverage.rolls += store.stats.segmentsRolled;
    coverage.segmentsDeleted += store.stats.segmentsDeleted;
  };
  const current = (): ModelState => states[states.length - 1]!;
  const issueSave = (hs: HardState | undefined, entries: Entry[], onAck?: () => void): void => {
    // A save is not atomic across a crash: the stream may end after any of its entries (its hard
    // state record comes last). Those partial states are valid recoveries until the save is acknowledged.
    const before = current();
    const partials = hs === undefined ? entries.length - 1 : entries.length;
    for (let k = 1; k <= partials; k++) states.push(applySave(before, undefined, entries.slice(0, k)));
    states.push(applySave(before, hs, entries));
    const j = states.length - 1;
    store.save(hs, entries, (err) => {
      expect(err).toBeNull();
      acked = Math.max(acked, j);
      onAck?.();
    });
  };
  /** Appends n entries of the current term (a save issued from a callback, as a replica does). */
  const appendNext = (n: number, size: number): void => {
    const s = current();
    const term = Math.max(s.hs.term, s.terms[s.last] ?? 0, 1);
    const entries = Array.from({ length: n }, (_, k) => entry(s.last + 1 + k, term, payload(s.last + 1 + k, term, size)));
    issueSave({ term: Term(term), vote: s.hs.term === term ? s.hs.vote : null, commit: s.hs.commit }, entries);
  };

  const check = (): void => {
    coverage.crashes++;
    if (store.recovery.truncatedAt !== null) coverage.tornTails++;
    if (store.recovery.truncatedAt?.reason.includes('later cycle') === true) coverage.laterCycleLanded++;
    if (acked < states.length - 1) coverage.partialAcks++;
    const reasons: string[] = [];
    for (let j = states.length - 1; j >= acked; j--) {
      const why = mismatch(states[j]!, store, snapshots);
      if (why === null) {
        states = [states[j]!];
        acked = 0;
        return;
      }
      reasons.push(`state ${j}: ${why}`);
    }
    throw new Error(`recovered store matches no state from ${acked} to ${states.length - 1}:\n${reasons.slice(0, 5).join('\n')}`);
  };

  for (const op of ops) {
    const s = current();
    switch (op.k) {
      case 'append': {
        // A crash may keep a save's entries but not its hard state, so entries can be ahead of hs.term.
        const base = Math.max(s.hs.term, s.terms[s.last] ?? 0, 1);
        const term = op.bumpTerm ? base + 1 : base;
        const entries = Array.from({ length: op.n }, (_, k) => entry(s.last + 1 + k, term, payload(s.last + 1 + k, term, op.size)));
        const last = s.last + op.n;
        const commit = Math.max(s.hs.commit, Math.floor(op.commit * last));
        const vote = op.vote ? voters[term % 3]! : term === s.hs.term ? s.hs.vote : null;
        issueSave({ term: Term(term), vote, commit: LogIndex(commit) }, entries, op.chain ? () => appendNext(1, op.size) : undefined);
        break;
      }
      case 'truncate': {
        // Raft only ever rewrites entries above the commit index.
        const lo = Math.max(s.hs.commit, s.snapIndex) + 1;
        if (lo > s.last) break;
        const at = lo + Math.floor(op.at * (s.last - lo + 1));
        const term = Math.max(s.hs.term, s.terms[s.last] ?? 0) + 1;
        const entries = Array.from({ length: op.n }, (_, k) => entry(at + k, term, payload(at + k, term, 20)));
        issueSave({ term: Term(term), vote: null, commit: s.hs.commit }, entries);
        break;
      }
      case 'snapshot': {
        if (s.hs.commit <= s.snapIndex) break;
        // Raft snapshots only what is applied, so at most the commit index.
        const at = Math.min(s.hs.commit, s.snapIndex + 1 + Math.floor(op.at * (s.hs.commit - s.snapIndex)));
        const snap: Snapshot = {
          meta: { index: LogIndex(at), term: Term(s.terms[at]!), conf: { voters, learners: [] } },
          data: Uint8Array.from(`snap${at}`, (c) => c.charCodeAt(0)),
        };
        snapshots.set(at, `snap${at}`);
        states.push(applySnapshot(s, snap));
        store.saveSnapshot(snap, (err) => expect(err).toBeNull());
        break;
      }
      case 'replace': {
        // A snapshot from the leader beyond our log, then the hard state that commits it.
        const at = s.last + op.gap;
        const term = Math.max(s.hs.term, s.terms[s.last] ?? 0, 1);
        const snap: Snapshot = {
          meta: { index: LogIndex(at), term: Term(term), conf: { voters, learners: [NodeId('d')] } },
          data: Uint8Array.from(`snap${at}`, (c) => c.charCodeAt(0)),
        };
        snapshots.set(at, `snap${at}`);
        states.push(applySnapshot(s, snap));
        coverage.replaced++;
        const j = states.length - 1;
        store.saveSnapshot(snap, (err) => {
          expect(err).toBeNull();
          acked = Math.max(acked, j);
        });
        issueSave({ term: Term(term), vote: s.hs.term === term ? s.hs.vote : null, commit: LogIndex(at) }, []);
        break;
      }
      case 'drain':
        disk.runSome(op.n);
        break;
      case 'crash':
        tally();
        disk.crash(op.random ? { mode: 'random', random: new SeededRandom(op.seed), reorder: op.reorder } : {});
        store = reopen(disk, random, op.duringOpen);
        check();
        break;
    }
  }
  tally();
  disk.crash({ mode: 'random', random });
  store = reopen(disk, random, 1);
  check();
}

describe('crash recovery (property)', () => {
  // Defined only for a replay, so that an ordinary run reports no skipped test.
  if (process.env.WAL_REPLAY !== undefined)
    it('replays one failing operation list (WAL_REPLAY=<counterexample JSON>)', () => {
      const ops = JSON.parse(process.env.WAL_REPLAY!) as Op[] | [Op[]];
      runScenario((Array.isArray(ops[0]) ? ops[0] : ops) as Op[]);
    });

  it('recovers a prefix containing everything acknowledged, after crashes at any point', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 10, maxLength: 150 }), (ops) => runScenario(ops)),
      { numRuns: Number(process.env.WAL_PROPERTY_RUNS ?? 150) },
    );
    // Every path the property is about was taken, many times.
    if (process.env.WAL_DEBUG) console.log(coverage);
    // laterCycleLanded is reported, not required: store.spec targets that case directly.
    for (const [what, n] of Object.entries(coverage)) if (what !== 'laterCycleLanded') expect(n, what).toBeGreaterThan(5);
  });

  it('detects a single flipped bit anywhere in a written record', () => {
    let refused = 0;
    let truncated = 0;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 120 }), fc.nat(), fc.nat(), (count, fileSeed, bitSeed) => {
        const disk = new MemDisk();
        const store = reopen(disk, new SeededRandom(1), 0);
        let state = emptyModel;
        const states: ModelState[] = [state];
        for (let i = 1; i <= count; i++) {
          const hs: HardState = { term: Term(1), vote: voters[0]!, commit: LogIndex(i - 1) };
          const e = entry(i, 1, payload(i, 1, 10 + (i % 50)));
          states.push(applySave(state, undefined, [e]));
          state = applySave(state, hs, [e]);
          states.push(state);
          store.save(hs, [e], () => {});
          if (i % 7 === 0) disk.runPending();
        }
        disk.runPending();
        const segments = disk.list(DIR).filter((n) => n.endsWith('.wal'));
        const name = segments[fileSeed % segments.length]!;
        const path = `${DIR}/${name}`;
        const content = disk.read(path);
        let end = content.length;
        while (end > 0 && content[end - 1] === 0) end--;
        if (end === 0) return;
        const bit = bitSeed % (end * 8);
        disk.flipBit(path, bit);
        disk.crash();
        let reopened: WalStore;
        try {
          reopened = reopen(disk, new SeededRandom(2), 0);
        } catch (err) {
          expect(err).toBeInstanceOf(WalCorruptionError);
          expect((err as WalCorruptionError).file).toBe(path);
          expect((err as WalCorruptionError).offset).toBeLessThanOrEqual(bit >> 3);
          refused++;
          return;
        }
        if (reopened.recovery.truncatedAt === null) {
          // Only an unused spare segment's header may be damaged without losing a record: it is replaced.
          expect(mismatch(state, reopened, new Map())).toBeNull();
          truncated++;
          return;
        }
        // Accepted: then the damaged record was cut off as a torn tail, and what remains is a true prefix.
        expect(reopened.recovery.truncatedAt.file).toBe(path);
        expect(reopened.recovery.truncatedAt!.offset).toBeLessThanOrEqual(bit >> 3);
        const reasons = states.map((s) => mismatch(s, reopened, new Map()));
        expect(
          reasons.some((r) => r === null),
          `no state matches: ${reasons.slice(-3).join('; ')}; ${JSON.stringify(reopened.recovery)}`,
        ).toBe(true);
        truncated++;
      }),
      { numRuns: Number(process.env.WAL_PROPERTY_RUNS ?? 300) },
    );
    expect(refused).toBeGreaterThan(0);
    expect(refused + truncated).toBeGreaterThan(250);
  });
});
