/**
 * `openRaftLogStore`: the durable `RaftLogStore` over a `Disk`.
 *
 * Layout of a store directory:
 *   <seq:16 hex>.wal       segments, preallocated to segmentBytesMax and
 *                          filled with framed, chain-checksummed records
 *   snap-<index:16 hex>.snap  the last `snapshotsKept` snapshots
 *   *.tmp                  files being prepared (deleted at open)
 *
 * Write path (group commit): `save` encodes its records at once into the
 * open batch buffer and queues its callback at the stream position after
 * them. One write+fdatasync cycle runs at a time; it takes the whole open
 * batch (up to `unsyncedBytesMax` bytes), and everything that arrives while
 * it runs lands in the next batch. So there is one fsync per batch, never one
 * per entry, and callbacks fire in call order once their bytes are durable.
 *
 * Segments are prepared ahead (created under a temporary name, zero-filled
 * to full size, header written, fsynced, renamed, directory fsynced), so a
 * roll costs a seal record and a switch of file handle. The writer never
 * writes a seal before the next segment is durable, and never writes into a
 * segment before the previous one's seal is durable; recovery relies on both.
 *
 * Hard state travels in the log as a record after the entries of the same
 * save, so one fsync makes both durable, in order: a vote is durable before
 * `done`. Each segment starts with the current hard state, so deleting old
 * segments never loses the latest one.
 *
 * Any write or fsync error fails the store for good: every pending and
 * later callback gets the error, and nothing is retried (after a failed
 * fsync the kernel may already have dropped the dirty pages).
 */
import { AssertionError, LogIndex, Term, assert, assertUint } from '@fencer/base';
import type { ConfState, Entry, HardState, Snapshot } from '@fencer/raft';
import { ByteWriter, utf8Length } from './bytes.js';
import { type Disk, type DiskFile, type Done, joinPath } from './disk.js';
import {
  nodeIdBytesMax,
  pendingCallbacksMax,
  segmentBytesDefault,
  segmentBytesMax as segmentBytesLimit,
  segmentBytesMin,
  snapshotsKeptDefault,
  snapshotsKeptMax,
  syncsInFlightDefault,
  syncsInFlightMax as syncsInFlightLimit,
  splitBytesMin,
  unsyncedBytesMax,
} from './limits.js';
import type { RaftLogStore } from './raft-log-store.js';
import {
  ENTRY_PAYLOAD_OVERHEAD_BYTES,
  RECORD_HEADER_BYTES,
  RecordKind,
  SEAL_RECORD_BYTES,
  SEGMENT_HEADER_RECORD_BYTES,
  beginRecord,
  encodeSegmentHeader,
  endRecord,
  writeEntryPayload,
  writeHardState,
} from './records.js';
import { type Recovered, type SegmentInfo, recover, segmentFileName } from './recover.js';
import { encodeSnapshot, snapshotFileName } from './snapshot-file.js';

export interface WalOptions {
  /** Size of each new segment file; a segment is rolled when the next record would not fit. */
  readonly segmentBytesMax?: number;
  /** Snapshot files kept; the log is compacted only below the oldest kept, so a corrupt newest one can fall back. */
  readonly snapshotsKept?: number;
  /**
   * Write+fdatasync cycles in flight at once (default 2). More than one
   * lets a new batch start while the previous fsync runs, which many disks
   * (and virtual disks) complete in parallel; callbacks still fire in order.
   */
  readonly syncsInFlightMax?: number;
}

/** What recovery found, for logs and tests. */
export interface RecoveryReport {
  /** Where a torn tail was cut, when one was. */
  readonly truncatedAt: { readonly file: string; readonly offset: number; readonly reason: string } | null;
  /** Snapshot files skipped (corrupt, or the log does not connect), with why. */
  readonly skippedSnapshots: ReadonlyArray<{ readonly name: string; readonly reason: string }>;
  /** Files deleted at open: temporaries, stale segments. */
  readonly deleted: readonly string[];
}

export interface WalStore extends RaftLogStore {
  readonly recovery: RecoveryReport;
  /** Counters for tests and the benchmark. */
  readonly stats: {
    readonly saves: number;
    readonly fsyncs: number;
    readonly batches: number;
    readonly segmentsRolled: number;
    readonly segmentsDeleted: number;
  };
}

/** Largest `data` of one entry with these options: a record must fit one segment with its header, start and seal. */
export function entryBytesMax(options: WalOptions = {}): number {
  const segmentBytes = options.segmentBytesMax ?? segmentBytesDefault;
  return (
    segmentBytes -
    SEGMENT_HEADER_RECORD_BYTES -
    startRecordBytesMax -
    SEAL_RECORD_BYTES -
    RECORD_HEADER_BYTES -
    ENTRY_PAYLOAD_OVERHEAD_BYTES
  );
}

/**
 * First buffer of a chunk; it doubles as records come. Most chunks hold one
 * save (an entry or two and a hard state), and a chunk is made per save
 * while an fsync runs, so a small start saves allocating and zeroing.
 */
const chunkBytesInitial = 512;

/** Start record: prevCrc + hard state with the longest vote. */
const hardStatePayloadBytesMax = 17 + 2 + nodeIdBytesMax;
const startRecordBytesMax = RECORD_HEADER_BYTES + 4 + hardStatePayloadBytesMax;

/** Opens the store in `dir` (creating it when empty), recovering from what is there. */
export function openRaftLogStore(disk: Disk, dir: string, options: WalOptions, done: (err: Error | null, store?: WalStore) => void): void {
  const segmentBytes = options.segmentBytesMax ?? segmentBytesDefault;
  const snapshotsKept = options.snapshotsKept ?? snapshotsKeptDefault;
  const syncsInFlight = options.syncsInFlightMax ?? syncsInFlightDefault;
  assert(
    Number.isInteger(syncsInFlight) && syncsInFlight >= 1 && syncsInFlight <= syncsInFlightLimit,
    `syncsInFlightMax must be in [1, ${syncsInFlightLimit}]`,
  );
  assertUint(segmentBytes, 'segmentBytesMax');
  assert(
    segmentBytes >= segmentBytesMin && segmentBytes <= segmentBytesLimit,
    `segmentBytesMax must be in [${segmentBytesMin}, ${segmentBytesLimit}]`,
  );
  assert(
    Number.isInteger(snapshotsKept) && snapshotsKept >= 1 && snapshotsKept <= snapshotsKeptMax,
    `snapshotsKept must be in [1, ${snapshotsKeptMax}]`,
  );
  let recovered: Recovered;
  try {
    disk.mkdirp(dir);
    recovered = recover(disk, dir);
  } catch (err) {
    return done(err as Error);
  }
  const store = new Store(disk, dir, segmentBytes, snapshotsKept, syncsInFlight, recovered);
  store.start((err) => (err === null ? done(null, store) : done(err)));
}

/** A batch buffer for one segment: contiguous bytes from filePos, written by one or more cycles. */
interface Chunk {
  readonly seq: number;
  readonly filePos: number;
  readonly streamStart: number;
  readonly w: ByteWriter;
  /** Bytes already handed to write+fsync cycles. */
  issued: number;
  /** No more records go in: a cycle took from it, or the segment rolled. */
  closed: boolean;
  /** Ends with a seal: not to be written before the next segment is durable. */
  hasSeal: boolean;
  /** A replacing snapshot's marker: not to be written before the snapshot file is durable. */
  latch: { released: boolean } | null;
}

interface Ack {
  /** Fires once the stream is durable up to here... */
  readonly pos: number;
  /** ...and a cycle numbered at least this has completed, so no callback fires inside the call that queued it. */
  readonly cycleMin: number;
  readonly done: Done;
}

class Store implements WalStore {
  // ---- read view ----
  private hardState: HardState;
  private snap: Snapshot;
  /** log[k] has index snap.meta.index + 1 + k. */
  private log: Entry[];

  // ---- encoder: where the next record goes ----
  private encSeq = 0;
  private encPos = 0;
  private encCrc = 0;
  private encSegmentBytes = 0;
  /** Bytes encoded since open; acks and syncs are positions in this stream. */
  private streamPos = 0;
  private encodedHardState: HardState;
  private readonly chunks: Chunk[] = [];
  private readonly acks: Ack[] = [];
  private syncWaiters: Array<{ pos: number; fn: (err: Error | null) => void }> = [];

  // ---- writer ----
  /** The segment being appended to, open through one handle per cycle slot (see `cycle`). */
  private active: { seq: number; files: DiskFile[] } | null = null;
  private spare: { seq: number; files: DiskFile[]; segmentBytes: number } | null = null;
  private preparing = false;
  private nextSegmentBytes: number;
  /** Stream position durable so far (every cycle up to it completed), and handed to cycles so far. */
  private syncedPos = 0;
  private issuedPos = 0;
  /** While syncedPos is below this, keep one cycle in flight (see writeWriter). */
  private soloUntilPos = 0;
  /** Cycles in flight, oldest first; `durable` once its fsync returned (it counts only when all before it did too). */
  private readonly inFlight: Array<{ readonly n: number; readonly endPos: number; readonly handle: number; durable: boolean }> = [];
  private pumping = false;
  private pumpAgain = false;
  private cyclesStarted = 0;
  private cyclesDone = 0;
  private failed: Error | null = null;
  private closing: Done | null = null;
  private closed = false;

  // ---- segments and snapshots ----
  /** Live segments, oldest first, with the highest entry index each holds. */
  private readonly segments: SegmentInfo[];
  /** Stream position after each segment's start record: its hard state is durable once synced past it. */
  private readonly startEnds = new Map<number, number>();
  private snapshots: Array<{ index: number; name: string }>;
  private readonly maintenance: Array<(next: () => void) => void> = [];
  private maintaining = false;

  readonly recovery: RecoveryReport;
  readonly stats = { saves: 0, fsyncs: 0, batches: 0, segmentsRolled: 0, segmentsDeleted: 0 };

  constructor(
    private readonly disk: Disk,
    private readonly dir: string,
    private readonly segmentBytes: number,
    private readonly snapshotsKept: number,
    private readonly syncsInFlight: number,
    private readonly rec: Recovered,
  ) {
    this.hardState = rec.hardState;
    this.encodedHardState = rec.hardState;
    this.snap = rec.snapshot;
    this.log = rec.entries;
    this.segments = rec.segments.map((s) => ({ ...s }));
    this.snapshots = rec.snapshots.filter((s) => s.index <= rec.snapshot.meta.index);
    this.nextSegmentBytes = segmentBytes;
    this.recovery = {
      truncatedAt:
        rec.truncatedAt === null
          ? null
          : { file: this.path(rec.truncatedAt.name), offset: rec.truncatedAt.offset, reason: rec.truncatedAt.reason },
      skippedSnapshots: rec.skippedSnapshots,
      deleted: rec.deletes,
    };
  }

  // ---- open ----

  /** Repairs what recovery found, opens or creates the active segment, and starts preparing the next. */
  start(done: Done): void {
    const rec = this.rec;
    const steps: Array<(next: Done) => void> = [];
    const deletes = this.leftoversToDelete();
    if (deletes.length > 0) steps.push((next) => this.unlinkAll(deletes, next));
    // Torn tails are zeroed before anything is written after them, so a later crash cannot mistake them for damage.
    for (const z of rec.zeroRanges) steps.push((next) => this.zeroRange(z, next));
    const active = rec.active;
    steps.push(active === null ? (next) => this.createFirstSegment(next) : (next) => this.reopenActive(active, next));
    const spare = rec.spare;
    if (spare !== null) steps.push((next) => this.reopenSpare(spare, next));
    runInOrder(steps, (err) => {
      if (err !== null) return done(err);
      this.prepareSpare();
      this.pump();
      done(null);
    });
  }

  /**
   * What recovery found to delete, and snapshot files newer than the chosen
   * one (the corrupt or disconnected ones), so a later snapshot with the
   * same name is not confused with them.
   */
  private leftoversToDelete(): string[] {
    const rec = this.rec;
    const deletes = [...rec.deletes, ...rec.snapshots.filter((s) => s.index > this.snap.meta.index).map((s) => s.name)];
    for (const skipped of rec.skippedSnapshots) if (skipped.name.endsWith('.snap')) deletes.push(skipped.name);
    return deletes;
  }

  private zeroRange(z: Recovered['zeroRanges'][number], done: Done): void {
    assert(z.to > z.from, 'a torn tail to zero is not empty');
    this.disk.open(this.path(z.name), 'existing', (err, file) => {
      if (err !== null || file === undefined) return done(err);
      file.write(z.from, new Uint8Array(z.to - z.from), (e1) => {
        if (e1 !== null) return done(e1);
        file.sync((e2) => {
          this.stats.fsyncs++;
          file.close((e3) => done(e2 ?? e3));
        });
      });
    });
  }

  /** An empty directory: segment 1, durable with its header before anything is written into it. */
  private createFirstSegment(done: Done): void {
    this.prepareSegment(1, this.segmentBytes, (err, files) => {
      if (err !== null || files === undefined) return done(err);
      this.active = { seq: 1, files };
      this.segments.push({ seq: 1, maxIndex: 0 });
      this.beginSegment(1, this.segmentBytes, 0);
      done(null);
    });
  }

  /** Appending continues where recovery found the end of the log. */
  private reopenActive(a: NonNullable<Recovered['active']>, done: Done): void {
    this.openHandles(segmentFileName(a.seq), [], (err, files) => {
      if (err !== null || files === undefined) return done(err);
      this.active = { seq: a.seq, files };
      this.encSeq = a.seq;
      this.encPos = a.position;
      this.encCrc = a.crc;
      this.encSegmentBytes = a.segmentBytes;
      if (a.needsStart) this.writeStart(a.prevCrc);
      else this.startEnds.set(a.seq, 0); // its start record was read back, so it is durable
      this.writeWriter();
      // A replacing snapshot whose marker was not durable: the marker goes before any new entry.
      if (this.rec.needsMarker) this.writeMarker(this.snap);
      done(null);
    });
  }

  private reopenSpare(s: NonNullable<Recovered['spare']>, done: Done): void {
    this.openHandles(segmentFileName(s.seq), [], (err, files) => {
      if (err !== null || files === undefined) return done(err);
      this.spare = { seq: s.seq, files, segmentBytes: s.segmentBytes };
      this.nextSegmentBytes = s.segmentBytes;
      done(null);
    });
  }

  // ---- RaftStorage: the read view ----

  initialState(): { hardState: HardState; conf: ConfState } {
    return { hardState: this.hardState, conf: this.snap.meta.conf };
  }

  entries(lo: LogIndex, hi: LogIndex, maxBytes: number): Entry[] {
    const first = this.firstIndex();
    if (!(lo >= first && lo <= hi && hi <= this.lastIndex() + 1))
      throw new AssertionError(`entries [${lo}, ${hi}) outside [${first}, ${this.lastIndex() + 1})`);
    const out: Entry[] = [];
    let bytes = 0;
    for (let i = lo; i < hi; i++) {
      const e = this.log[i - first]!;
      bytes += e.data.length;
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  term(index: LogIndex): Term {
    const first = this.firstIndex();
    if (!(index >= first - 1 && index <= this.lastIndex()))
      throw new AssertionError(`term(${index}) outside [${first - 1}, ${this.lastIndex()}]`);
    if (index === first - 1) return this.snap.meta.term;
    return this.log[index - first]!.term;
  }

  firstIndex(): LogIndex {
    return LogIndex(this.snap.meta.index + 1);
  }

  lastIndex(): LogIndex {
    return LogIndex(this.snap.meta.index + this.log.length);
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  // ---- persistence ----

  save(hardState: HardState | undefined, entries: readonly Entry[], done: Done): void {
    assert(!this.closed && this.closing === null, 'save after close');
    if (this.failed !== null) return done(this.failed);
    this.stats.saves++;
    if (entries.length > 0) {
      const first = this.firstIndex();
      const at = entries[0]!.index;
      if (!(at >= first && at <= this.lastIndex() + 1))
        throw new AssertionError(`save at ${at} outside [${first}, ${this.lastIndex() + 1}]`);
      for (let k = 0; k < entries.length; k++) {
        // Assertions per entry build their message only when they fail.
        const e = entries[k]!;
        assert(e.index === at + k, 'entries are contiguous');
        const prevTerm = k === 0 ? this.term(LogIndex(at - 1)) : entries[k - 1]!.term;
        if (!(e.term >= prevTerm)) throw new AssertionError(`entry ${e.index} term ${e.term} below its predecessor's ${prevTerm}`);
      }
      this.log.length = at - first;
      for (const e of entries) {
        this.log.push(e);
        this.writeEntry(e);
      }
    }
    if (hardState !== undefined && !sameHardState(hardState, this.encodedHardState)) {
      assert(hardState.term >= this.hardState.term, 'term never goes back');
      this.hardState = hardState;
      this.encodedHardState = hardState;
      this.writeRecord(RecordKind.HardState, hardStatePayloadBytes(hardState), (w) => writeHardState(w, hardState));
    }
    this.queueAck(done);
    this.pump();
  }

  saveSnapshot(snapshot: Snapshot, done: Done): void {
    assert(!this.closed && this.closing === null, 'saveSnapshot after close');
    if (this.failed !== null) return done(this.failed);
    const at = snapshot.meta.index;
    if (at <= this.snap.meta.index) {
      // Not newer than what we hold: nothing to store. Completed after the next sync, like an empty save.
      this.queueAck(done);
      this.pump();
      return;
    }
    // Must agree with recovery's replay of the marker: keep the entries after a snapshot that matches the log.
    const matches = at <= this.lastIndex() && this.term(at) === snapshot.meta.term;
    const callPos = this.streamPos;
    this.log = matches ? this.log.slice(at - this.snap.meta.index) : [];
    this.snap = snapshot;
    const latch = { released: false };
    if (!matches) {
      // The snapshot replaces the log. Its marker tells recovery to drop the old entries; nothing
      // after it may reach the disk before the snapshot file is durable. The marker's place in the
      // stream acknowledges the call.
      this.closeOpenChunk();
      this.writeMarker(snapshot);
      this.chunks[this.chunks.length - 1]!.latch = latch;
      this.queueAck(done);
    }
    this.installSnapshotFile(snapshot, callPos, latch, matches ? done : null);
  }

  /**
   * Writes the snapshot file, durably named, then releases the marker held
   * by `latch` and compacts. Not before the stream is durable up to
   * `before`: recovery adopts the newest valid snapshot file, and must never
   * combine it with a log missing records that preceded it.
   */
  private installSnapshotFile(snapshot: Snapshot, before: number, latch: { released: boolean }, done: Done | null): void {
    const at = snapshot.meta.index;
    const name = snapshotFileName(at);
    const bytes = encodeSnapshot(snapshot);
    this.enqueueMaintenance((next) =>
      this.whenSynced(before, (failed) => {
        if (failed !== null) {
          done?.(failed);
          return next();
        }
        this.writeFileAtomically(name, bytes, (err) => {
          if (err !== null) {
            this.fail(err);
            done?.(err);
            return next();
          }
          latch.released = true;
          this.snapshots.push({ index: at, name });
          done?.(null);
          this.pump();
          this.compact(next);
        });
      }),
    );
  }

  close(done: Done): void {
    assert(!this.closed && this.closing === null, 'double close');
    this.closing = done;
    this.pump();
  }

  // ---- encoder ----

  private writeEntry(e: Entry): void {
    const payloadBytes = ENTRY_PAYLOAD_OVERHEAD_BYTES + e.data.length;
    this.writeRecord(RecordKind.Entry, payloadBytes, (w) => writeEntryPayload(w, e));
    const seg = this.segments[this.segments.length - 1]!;
    assert(seg.seq === this.encSeq, 'segment list follows the encoder');
    seg.maxIndex = Math.max(seg.maxIndex, e.index);
  }

  /** Appends one record to the stream, rolling to the next segment first when it would not fit. */
  private writeRecord(kind: RecordKind, payloadBytes: number, fill: (w: ByteWriter) => void): void {
    const recordBytes = RECORD_HEADER_BYTES + payloadBytes;
    if (kind !== RecordKind.Seal && this.encPos + recordBytes + SEAL_RECORD_BYTES > this.encSegmentBytes) this.roll();
    assert(
      this.encPos + recordBytes + (kind === RecordKind.Seal ? 0 : SEAL_RECORD_BYTES) <= this.encSegmentBytes,
      `record of ${recordBytes} bytes fits no segment of ${this.encSegmentBytes}`,
    );
    const chunk = this.openChunk();
    const w = chunk.w;
    const before = w.length;
    const start = beginRecord(w, kind, this.encCrc);
    fill(w);
    this.encCrc = endRecord(w, start);
    const written = w.length - before;
    if (written !== recordBytes) throw new AssertionError(`record size ${written}, expected ${recordBytes}`);
    this.encPos += written;
    this.streamPos += written;
  }

  /** Tells recovery how many cycles this run keeps in flight (see RecordKind.Writer). */
  private writeWriter(): void {
    this.writeRecord(RecordKind.Writer, 1, (w) => w.u8(this.syncsInFlight));
    // Until it is durable, recovery would judge a gap by an earlier run's record: one cycle at a time.
    this.soloUntilPos = this.streamPos;
  }

  private writeMarker(snapshot: Snapshot): void {
    this.writeRecord(RecordKind.SnapshotMarker, 16, (w) => {
      w.u64(snapshot.meta.index);
      w.u64(snapshot.meta.term);
    });
  }

  private openChunk(): Chunk {
    const last = this.chunks[this.chunks.length - 1];
    if (last !== undefined && !last.closed && last.seq === this.encSeq) return last;
    const chunk: Chunk = {
      seq: this.encSeq,
      filePos: this.encPos,
      streamStart: this.streamPos,
      w: new ByteWriter(chunkBytesInitial),
      issued: 0,
      closed: false,
      hasSeal: false,
      latch: null,
    };
    this.chunks.push(chunk);
    return chunk;
  }

  private closeOpenChunk(): void {
    const last = this.chunks[this.chunks.length - 1];
    if (last !== undefined) last.closed = true;
  }

  private roll(): void {
    const sealSeq = this.encSeq;
    this.writeRecord(RecordKind.Seal, 8, (w) => w.u64(sealSeq + 1));
    const chunk = this.chunks[this.chunks.length - 1]!;
    chunk.hasSeal = true;
    chunk.closed = true;
    const sealCrc = this.encCrc;
    this.segments.push({ seq: sealSeq + 1, maxIndex: 0 });
    this.beginSegment(sealSeq + 1, this.nextSegmentBytes, sealCrc);
  }

  /** Points the encoder just past the (already written) header of segment seq and writes its start record. */
  private beginSegment(seq: number, segmentBytes: number, prevCrc: number): void {
    this.encSeq = seq;
    this.encPos = SEGMENT_HEADER_RECORD_BYTES;
    this.encCrc = encodeSegmentHeader({ seq, segmentBytes }).crc;
    this.encSegmentBytes = segmentBytes;
    this.writeStart(prevCrc);
    // Each segment says how it was written, so compacting older ones never hides it from recovery.
    this.writeWriter();
  }

  private writeStart(prevCrc: number): void {
    const hs = this.encodedHardState;
    this.writeRecord(RecordKind.Start, 4 + hardStatePayloadBytes(hs), (w) => {
      w.u32(prevCrc);
      writeHardState(w, hs);
    });
    this.startEnds.set(this.encSeq, this.streamPos);
  }

  // ---- writer ----

  /**
   * Runs the next write+fsync cycle if one is due and possible, and fires
   * the callbacks that are durable. Callbacks may call save() and so pump()
   * again: a nested call only asks the running one to go round once more,
   * so there is never more than one cycle in flight.
   */
  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.pumpAgain = false;
        this.pumpOnce();
      } while (this.pumpAgain);
    } finally {
      this.pumping = false;
    }
  }

  private pumpOnce(): void {
    if (this.failed !== null || this.closed) return this.finishCloseIfIdle();
    this.fireAcks();
    while (this.failed === null && !this.closed && this.inFlight.length < this.slots()) {
      if (!this.startCycle()) break;
    }
    this.finishCloseIfIdle();
  }

  /** Cycles allowed in flight now. */
  private slots(): number {
    return this.syncedPos < this.soloUntilPos ? 1 : this.syncsInFlight;
  }

  /** Starts the next write+fsync cycle if one is due and allowed; returns whether it did. */
  private startCycle(): boolean {
    const head = this.headChunk();
    if (head === undefined || head.issued === head.w.length) {
      // Nothing to write. A callback queued after the last cycle started (an empty save) still
      // waits for a cycle of its own, so that no callback fires inside the call that queued it.
      const last = this.acks[this.acks.length - 1];
      if (last !== undefined && last.cycleMin > this.cyclesStarted) {
        this.cycle(null, 0, 0);
        return true;
      }
      return false;
    }
    if (head.latch !== null && !head.latch.released) return false;
    const active = this.active;
    assert(active !== null, 'an active segment while writing');
    if (head.seq !== active.seq && !this.switchToSpare(head.seq)) return false;
    if (head.hasSeal && this.spare === null) return false; // never seal before the next segment is durable
    head.closed = true;
    // Bytes past the last fsync stay within unsyncedBytesMax in all, which recovery's torn-tail rule relies on.
    const from = head.issued;
    let to = Math.min(head.w.length, from + Math.floor(unsyncedBytesMax / this.syncsInFlight));
    // With free slots and a big enough batch, share it out so the fsyncs run side by side: a disk
    // that completes parallel fsyncs together then carries more per unit of time.
    const free = this.slots() - this.inFlight.length;
    if (free > 1 && to - from >= 2 * splitBytesMin) to = from + Math.max(splitBytesMin, Math.ceil((to - from) / free));
    head.issued = to;
    this.cycle(head, from, to);
    return true;
  }

  /** The oldest chunk with bytes not yet handed to a cycle, dropping those fully handed out. */
  private headChunk(): Chunk | undefined {
    let head = this.chunks[0];
    while (head !== undefined && head.closed && head.issued === head.w.length) {
      this.chunks.shift();
      head = this.chunks[0];
    }
    return head;
  }

  /**
   * Makes the spare the active segment, for the first write into segment
   * `seq`; returns false while that must wait. Never writes into a segment
   * before the previous one (and its seal) is durable.
   */
  private switchToSpare(seq: number): boolean {
    const active = this.active;
    assert(active !== null && seq === active.seq + 1, 'segments are written in order');
    if (this.inFlight.length > 0) return false;
    if (this.spare === null) return false; // prepareSpare's completion pumps again
    assert(this.spare.seq === seq, 'the spare is the next segment');
    const old = active.files;
    this.active = { seq: this.spare.seq, files: this.spare.files };
    this.spare = null;
    this.stats.segmentsRolled++;
    for (const f of old) f.close(() => {});
    this.prepareSpare();
    return true;
  }

  /**
   * One write (of chunk bytes [from, to)) then one fdatasync; a null chunk
   * syncs only. Each cycle in flight uses its own handle (file description),
   * so a writeback error is reported to every fsync that could cover it,
   * not only to whichever asks first (Linux reports it once per description).
   */
  private cycle(chunk: Chunk | null, from: number, to: number): void {
    const active = this.active;
    assert(active !== null, 'an active segment to sync');
    assert(this.inFlight.length < this.syncsInFlight, 'cycles in flight within syncsInFlightMax');
    const handle = this.freeHandle(active.files.length);
    assert(handle >= 0, 'a free handle for the cycle');
    const file = active.files[handle]!;
    if (chunk !== null) this.issuedPos = chunk.streamStart + to;
    const slot = { n: ++this.cyclesStarted, endPos: this.issuedPos, handle, durable: false };
    this.inFlight.push(slot);
    this.stats.batches++;
    const synced = (err: Error | null): void => {
      this.stats.fsyncs++;
      if (err !== null) return this.fail(err);
      slot.durable = true;
      // Durable in order only: a later fsync finishing first proves nothing about an earlier one's error.
      while (this.inFlight[0]?.durable === true) {
        const done = this.inFlight.shift()!;
        this.syncedPos = Math.max(this.syncedPos, done.endPos);
        this.cyclesDone = done.n;
      }
      this.pump();
    };
    if (chunk === null || to === from) return file.sync(synced);
    file.write(chunk.filePos + from, chunk.w.buf.subarray(from, to), (err) => (err !== null ? this.fail(err) : file.sync(synced)));
  }

  /** The lowest handle no cycle in flight uses, or -1. */
  private freeHandle(handles: number): number {
    for (let i = 0; i < handles; i++) {
      let used = false;
      for (const c of this.inFlight) if (c.handle === i) used = true;
      if (!used) return i;
    }
    return -1;
  }

  /** Runs fn once the stream is durable up to pos (at once if it is), or with the error if the store fails first. */
  private whenSynced(pos: number, fn: (err: Error | null) => void): void {
    if (this.failed !== null) return fn(this.failed);
    if (this.syncedPos >= pos) return fn(null);
    this.syncWaiters.push({ pos, fn });
  }

  private queueAck(done: Done): void {
    if (!(this.acks.length < pendingCallbacksMax))
      throw new AssertionError(`more than ${pendingCallbacksMax} saves waiting for their callbacks`);
    this.acks.push({ pos: this.streamPos, cycleMin: this.cyclesStarted + 1, done });
  }

  private fireAcks(): void {
    if (this.syncWaiters.length > 0) {
      const due = this.syncWaiters.filter((w) => w.pos <= this.syncedPos);
      this.syncWaiters = this.syncWaiters.filter((w) => w.pos > this.syncedPos);
      for (const w of due) w.fn(null);
    }
    let n = 0;
    while (n < this.acks.length && this.acks[n]!.pos <= this.syncedPos && this.acks[n]!.cycleMin <= this.cyclesDone) n++;
    if (n === 0) return;
    const ready = this.acks.splice(0, n);
    for (const a of ready) a.done(null);
  }

  private fail(err: Error): void {
    if (this.failed !== null) return;
    this.failed = err;
    this.inFlight.length = 0;
    const pending = this.acks.splice(0);
    for (const a of pending) a.done(err);
    for (const w of this.syncWaiters.splice(0)) w.fn(err);
    this.finishCloseIfIdle();
  }

  private prepareSpare(): void {
    if (this.spare !== null || this.preparing || this.failed !== null || this.closed) return;
    const active = this.active;
    assert(active !== null, 'an active segment before a spare');
    const seq = active.seq + 1;
    const bytes = this.nextSegmentBytes;
    this.preparing = true;
    this.prepareSegment(seq, bytes, (err, files) => {
      this.preparing = false;
      if (err !== null || files === undefined) return this.fail(err ?? new Error('no file'));
      this.spare = { seq, files, segmentBytes: bytes };
      this.nextSegmentBytes = this.segmentBytes;
      this.pump();
      this.finishCloseIfIdle();
    });
  }

  /** Creates a full-size segment with its header under a temporary name, then gives it its final name durably. */
  private prepareSegment(seq: number, segmentBytes: number, done: (err: Error | null, files?: DiskFile[]) => void): void {
    const name = segmentFileName(seq);
    const tmp = this.path(`${name}.tmp`);
    const header = encodeSegmentHeader({ seq, segmentBytes }).bytes;
    this.disk.open(tmp, 'create', (err, file) => {
      if (err !== null || file === undefined) return done(err);
      file.allocate(segmentBytes, (e1) => {
        if (e1 !== null) return done(e1);
        file.write(0, header, (e2) => {
          if (e2 !== null) return done(e2);
          file.sync((e3) => {
            this.stats.fsyncs++;
            if (e3 !== null) return done(e3);
            this.disk.rename(tmp, this.path(name), (e4) => {
              if (e4 !== null) return done(e4);
              this.disk.syncDir(this.dir, (e5) => (e5 !== null ? done(e5) : this.openHandles(name, [file], done)));
            });
          });
        });
      });
    });
  }

  /** Opens `name` until there is one handle per cycle slot, after those in `have`. */
  private openHandles(name: string, have: DiskFile[], done: (err: Error | null, files?: DiskFile[]) => void): void {
    if (have.length === this.syncsInFlight) return done(null, have);
    this.disk.open(this.path(name), 'existing', (err, file) => {
      if (err !== null || file === undefined) return done(err);
      this.openHandles(name, [...have, file], done);
    });
  }

  // ---- snapshots and compaction ----

  private writeFileAtomically(name: string, bytes: Uint8Array, done: Done): void {
    const tmp = this.path(`${name}.tmp`);
    this.disk.open(tmp, 'create', (err, file) => {
      if (err !== null || file === undefined) return done(err);
      file.write(0, bytes, (e1) => {
        if (e1 !== null) return done(e1);
        file.sync((e2) => {
          this.stats.fsyncs++;
          if (e2 !== null) return done(e2);
          file.close((e3) => {
            if (e3 !== null) return done(e3);
            this.disk.rename(tmp, this.path(name), (e4) => (e4 !== null ? done(e4) : this.disk.syncDir(this.dir, done)));
          });
        });
      });
    });
  }

  /** Deletes snapshots beyond the newest `snapshotsKept`, then whole segments below the oldest kept. */
  private compact(done: () => void): void {
    if (this.failed !== null) return done();
    this.snapshots.sort((a, b) => a.index - b.index);
    const drop = this.snapshots.slice(0, Math.max(0, this.snapshots.length - this.snapshotsKept));
    this.snapshots = this.snapshots.slice(drop.length);
    const oldestKept = this.snapshots[0]?.index ?? 0;
    const names = drop.map((s) => s.name);
    // Only sealed segments whose successor's start record (carrying the hard state) is durable.
    let durableStartSeq = 0;
    for (const [seq, end] of this.startEnds)
      if (end <= this.syncedPos && seq <= (this.active?.seq ?? 0)) durableStartSeq = Math.max(durableStartSeq, seq);
    let k = 0;
    while (k < this.segments.length - 1 && this.segments[k]!.seq < durableStartSeq && this.segments[k]!.maxIndex <= oldestKept) k++;
    for (const s of this.segments.splice(0, k)) {
      names.push(segmentFileName(s.seq));
      this.startEnds.delete(s.seq);
      this.stats.segmentsDeleted++;
    }
    if (names.length === 0) return done();
    this.unlinkAll(names, (err) => {
      if (err !== null) this.fail(err);
      done();
    });
  }

  private unlinkAll(names: readonly string[], done: Done): void {
    const step = (i: number): void => {
      if (i === names.length) return this.disk.syncDir(this.dir, done);
      this.disk.unlink(this.path(names[i]!), (err) => (err !== null ? done(err) : step(i + 1)));
    };
    step(0);
  }

  private enqueueMaintenance(task: (next: () => void) => void): void {
    this.maintenance.push(task);
    if (!this.maintaining) this.runMaintenance();
  }

  private runMaintenance(): void {
    const task = this.maintenance.shift();
    if (task === undefined) {
      this.maintaining = false;
      return this.finishCloseIfIdle();
    }
    this.maintaining = true;
    task(() => this.runMaintenance());
  }

  // ---- close ----

  private finishCloseIfIdle(): void {
    const done = this.closing;
    if (done === null || this.closed || this.preparing || this.maintaining) return;
    if (this.failed === null && (this.inFlight.length > 0 || this.acks.length > 0 || this.chunks.some((c) => c.issued < c.w.length)))
      return;
    this.closed = true;
    const files = [...(this.active?.files ?? []), ...(this.spare?.files ?? [])];
    this.active = null;
    this.spare = null;
    let left = files.length;
    if (left === 0) return done(null);
    let first: Error | null = null;
    for (const f of files) {
      f.close((err) => {
        first ??= err;
        if (--left === 0) done(first);
      });
    }
  }

  private path(name: string): string {
    return joinPath(this.dir, name);
  }
}

/** Runs callback steps one after another; stops at the first error. */
function runInOrder(steps: ReadonlyArray<(next: Done) => void>, done: Done): void {
  const run = (i: number): void => {
    if (i === steps.length) return done(null);
    steps[i]!((err) => (err !== null ? done(err) : run(i + 1)));
  };
  run(0);
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function hardStatePayloadBytes(hs: HardState): number {
  if (hs.vote === null) return 17;
  const voteBytes = utf8Length(hs.vote);
  if (!(voteBytes <= nodeIdBytesMax)) throw new AssertionError(`node id of ${voteBytes} bytes exceeds ${nodeIdBytesMax}`);
  return 17 + 2 + voteBytes;
}
