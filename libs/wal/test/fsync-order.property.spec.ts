/**
 * Goal: prove the WAL's fsync ordering. Whatever mix of appends,
 * sync barriers, snapshots and compactions runs, and wherever a crash
 * strikes, with every write no completed fdatasync covered and every
 * directory change no directory fsync covered lost, or some of them kept:
 * torn at a random byte, torn sector by sector or page by page, or out of
 * order. After recovery, every entry acknowledged as durable is there, in
 * order, and nothing else is: the log is a prefix of the history issued
 * since the last recovery, the snapshot is one that was issued and no older
 * than the newest acknowledged, and the commit index no lower than the last
 * acknowledged one. The check bites: over a disk that lies about fdatasync,
 * or about directory fsync, the same property fails.
 *
 * Method: fast-check generates operation lists against the store over
 * `@fencer/wal/testing`'s MemDisk, whose completions run only in `drain`
 * steps, so saves pile up into group commits and crashes strike between
 * any two disk completions, including while a store opens or prepares a
 * segment. Payloads carry a crash epoch, so an entry resurrected from an
 * earlier history shows. Seed WAL_FSYNC_SEED (default 20261201), runs
 * WAL_FSYNC_RUNS (default 200); the test prints both and what it covered.
 */
import { LogIndex, NodeId, SeededRandom, Term } from '@fencer/base';
import type { HardState, Snapshot } from '@fencer/raft';
import { type Disk, type WalOptions, type WalStore, openRaftLogStore } from '@fencer/wal';
import { type CrashPolicy, type DiskLie, MemDisk, lyingDisk } from '@fencer/wal/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DIR, allEntries, entry, text } from './helpers.js';

const seed = Number(process.env.WAL_FSYNC_SEED ?? 20261201);
const numRuns = Number(process.env.WAL_FSYNC_RUNS ?? 200);
/** A scenario takes a few milliseconds, several times that on a loaded machine. */
const timeoutMs = 30_000 + numRuns * 100;

type Op =
  | { k: 'append'; n: number; size: number }
  /** An empty save: acknowledged once everything saved before it is durable. */
  | { k: 'barrier' }
  | { k: 'drain'; n: number }
  | { k: 'snapshot'; at: number }
  | { k: 'crash'; policy: number; seed: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ k: fc.constant('append' as const), n: fc.integer({ min: 1, max: 8 }), size: fc.integer({ min: 0, max: 600 }) }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('barrier' as const) }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('drain' as const), n: fc.integer({ min: 0, max: 60 }) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('snapshot' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('crash' as const), policy: fc.nat(), seed: fc.nat() }) },
);

const scenarioArb = fc.record({
  syncsInFlightMax: fc.integer({ min: 1, max: 3 }),
  ops: fc.array(opArb, { minLength: 20, maxLength: 200 }),
});

/** What a crash keeps of what was not durable. */
const policies: ReadonlyArray<{ name: string; policy: (random: SeededRandom) => CrashPolicy }> = [
  { name: 'lose all', policy: () => ({ mode: 'lose' }) },
  { name: 'prefix, torn at a byte', policy: (random) => ({ mode: 'random', random }) },
  { name: 'subset, out of order', policy: (random) => ({ mode: 'random', random, reorder: true }) },
  { name: 'prefix, torn by 512-byte sectors', policy: (random) => ({ mode: 'random', random, tearUnitBytes: 512 }) },
  { name: 'prefix, torn by 4 KiB pages', policy: (random) => ({ mode: 'random', random, tearUnitBytes: 4096, tearChance: 1 }) },
];

const voters = [NodeId('a'), NodeId('b'), NodeId('c')];

function payload(index: number, epoch: number, size: number): string {
  return `${index}@${epoch}:`.padEnd(size, String.fromCharCode(97 + ((index * 7 + epoch) % 26)));
}

/** Counts of what the scenarios exercised, reported and checked for reach. */
const coverage = {
  scenarios: 0,
  crashes: 0,
  ackedEntriesFound: 0,
  unackedEntriesKept: 0,
  tornTails: 0,
  sectorTearsCut: 0,
  segmentsRolled: 0,
  segmentsDeleted: 0,
  snapshotsAcked: 0,
  recoveredFromSnapshot: 0,
  byPolicy: policies.map(() => 0),
};

/** Opens the store, running disk completions one at a time until it is open: the spare is still being prepared. */
function reopen(memDisk: MemDisk, disk: Disk, options: WalOptions): WalStore {
  let result: { err: Error | null; store?: WalStore } | undefined;
  openRaftLogStore(disk, DIR, options, (err, store) => (result = { err, store }));
  for (let ran = 0; result === undefined; ran++) {
    if (memDisk.runSome(1) === 0 || ran > 10_000) throw new Error('open did not finish');
  }
  if (result.err !== null) throw result.err;
  return result.store!;
}

/**
 * Runs one scenario; throws when a recovery loses an acknowledged entry,
 * shows one that was never issued, or refuses to open after a crash.
 */
function runScenario(syncsInFlightMax: number, ops: readonly Op[], lie?: DiskLie): void {
  const options: WalOptions = { segmentBytesMax: 4096, snapshotsKept: 2, syncsInFlightMax };
  const memDisk = new MemDisk();
  const disk = lie === undefined ? memDisk : lyingDisk(memDisk, lie);
  let store = reopen(memDisk, disk, options);
  // The history since the last recovery: history[i] is entry i's payload.
  let history: string[] = [''];
  let epoch = 0;
  let ackedLast = 0;
  let ackedCommit = 0;
  let ackedSnapshot = 0;
  let snapshotIndex = 0;
  const snapshots = new Map<number, string>();

  const recoverAndCheck = (policy: number, crashSeed: number): void => {
    coverage.crashes++;
    coverage.byPolicy[policy]!++;
    coverage.segmentsRolled += store.stats.segmentsRolled;
    coverage.segmentsDeleted += store.stats.segmentsDeleted;
    memDisk.crash(policies[policy]!.policy(new SeededRandom(crashSeed)));
    store = reopen(memDisk, disk, options);
    const last = store.lastIndex();
    const first = store.firstIndex();
    const issuedLast = history.length - 1;
    if (store.recovery.truncatedAt !== null) coverage.tornTails++;
    if (store.recovery.truncatedAt?.reason.includes('never reached') === true) coverage.sectorTearsCut++;
    // Everything acknowledged is there, and nothing that was never issued.
    expect(last, 'recovered log ends before an acknowledged entry').toBeGreaterThanOrEqual(ackedLast);
    expect(last, 'recovered log ends after the last issued entry').toBeLessThanOrEqual(issuedLast);
    const snap = store.snapshot();
    expect(snap.meta.index, 'snapshot older than the newest acknowledged').toBeGreaterThanOrEqual(ackedSnapshot);
    if (snap.meta.index > 0) expect(String.fromCharCode(...snap.data), 'snapshot content').toBe(snapshots.get(snap.meta.index));
    if (snap.meta.index > 0 && snap.meta.index >= first) throw new Error('firstIndex is not after the snapshot');
    if (snap.meta.index > 0) coverage.recoveredFromSnapshot++;
    // In order, each entry the one issued last at its index.
    const entries = allEntries(store);
    entries.forEach((e, k) => {
      expect(e.index, 'entries are contiguous').toBe(first + k);
      expect(text(e), `entry ${e.index}`).toBe(history[e.index]);
    });
    expect(store.initialState().hardState.commit, 'commit index below the acknowledged one').toBeGreaterThanOrEqual(ackedCommit);
    coverage.ackedEntriesFound += ackedLast - snap.meta.index > 0 ? ackedLast - snap.meta.index : 0;
    coverage.unackedEntriesKept += last - ackedLast;
    // The recovered state is the new truth: later entries are issued again in a new epoch.
    history = history.slice(0, last + 1);
    epoch++;
    ackedLast = last;
    ackedCommit = store.initialState().hardState.commit;
    ackedSnapshot = snap.meta.index;
    snapshotIndex = snap.meta.index;
  };

  for (const op of ops) {
    switch (op.k) {
      case 'append': {
        const at = history.length;
        const entries = Array.from({ length: op.n }, (_, k) => entry(at + k, 1, payload(at + k, epoch, op.size)));
        for (const e of entries) history.push(text(e));
        const last = history.length - 1;
        // The commit index of a leader alone: what it already knows is durable.
        const hs: HardState = { term: Term(1), vote: voters[0]!, commit: LogIndex(ackedLast) };
        store.save(hs, entries, (err) => {
          expect(err).toBeNull();
          ackedLast = Math.max(ackedLast, last);
          ackedCommit = Math.max(ackedCommit, hs.commit);
        });
        break;
      }
      case 'barrier': {
        const last = history.length - 1;
        store.save(undefined, [], (err) => {
          expect(err).toBeNull();
          ackedLast = Math.max(ackedLast, last);
        });
        break;
      }
      case 'drain':
        memDisk.runSome(op.n);
        break;
      case 'snapshot': {
        // Raft snapshots only applied, so committed, entries; the store then compacts below the older kept one.
        if (ackedCommit <= snapshotIndex) break;
        // Mostly near the commit index, as a replica snapshots what it has applied.
        const at = ackedCommit - Math.floor(op.at * op.at * (ackedCommit - snapshotIndex - 1));
        const data = `snap ${at}: ${history[at]!.slice(0, 24)}`;
        snapshots.set(at, data);
        snapshotIndex = at;
        const snap: Snapshot = {
          meta: { index: LogIndex(at), term: Term(1), conf: { voters, learners: [] } },
          data: Uint8Array.from(data, (c) => c.charCodeAt(0)),
        };
        store.saveSnapshot(snap, (err) => {
          expect(err).toBeNull();
          coverage.snapshotsAcked++;
          ackedSnapshot = Math.max(ackedSnapshot, at);
        });
        break;
      }
      case 'crash':
        recoverAndCheck(op.policy % policies.length, op.seed);
        break;
    }
  }
  recoverAndCheck(ops.length % policies.length, ops.length);
  coverage.scenarios++;
}

describe('fsync ordering (property over a disk that drops unsynced writes at a crash)', () => {
  it(
    `every acknowledged entry survives any crash, in order, and nothing unissued appears (seed ${seed}, ${numRuns} runs)`,
    () => {
      fc.assert(
        fc.property(scenarioArb, ({ syncsInFlightMax, ops }) => runScenario(syncsInFlightMax, ops)),
        { seed, numRuns },
      );
      console.log(`fsync-order: seed ${seed}, ${numRuns} runs`, JSON.stringify(coverage));
      expect(coverage.scenarios).toBe(numRuns);
      // Every path the property is about was taken, many times.
      for (const what of [
        'crashes',
        'ackedEntriesFound',
        'unackedEntriesKept',
        'segmentsRolled',
        'segmentsDeleted',
        'snapshotsAcked',
        'recoveredFromSnapshot',
      ] as const) {
        expect(coverage[what], what).toBeGreaterThan(numRuns / 10);
      }
      // Most crashes strike between cycles, with nothing torn: about one scenario in ten cuts a tail.
      expect(coverage.tornTails, 'tornTails').toBeGreaterThan(numRuns / 20);
      for (const [k, n] of coverage.byPolicy.entries()) expect(n, policies[k]!.name).toBeGreaterThan(numRuns / 10);
    },
    timeoutMs,
  );

  it.each<DiskLie>(['sync', 'syncDir'])(
    `fails over a disk whose %s lies (negative control, seed ${seed})`,
    (lie) => {
      const result = fc.check(
        fc.property(scenarioArb, ({ syncsInFlightMax, ops }) => runScenario(syncsInFlightMax, ops, lie)),
        { seed, numRuns },
      );
      expect(result.failed, `the property held over a disk whose ${lie} lies: it cannot see lost writes`).toBe(true);
      console.log(
        `fsync-order negative control (${lie} lies): failed after ${result.numRuns} runs, seed ${result.seed}: ${String(result.errorInstance).split('\n')[0]}`,
      );
    },
    timeoutMs,
  );
});
