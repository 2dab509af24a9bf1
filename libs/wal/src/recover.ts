/**
 * Recovery: rebuilds hard state, snapshot and log from a WAL directory, and
 * decides what must be repaired before the store writes again. Pure over
 * the synchronous half of `Disk` (list, read): it changes nothing on disk.
 *
 * What it accepts and what it refuses:
 * - A torn or zeroed tail after the last good record of the last segment is
 *   truncated (zeroed before new writes), because the writer never has more
 *   than `unsyncedBytesMax` bytes past its last fsync and only ever writes
 *   into a segment after the previous one's seal is durable.
 * - A bad record anywhere else is corruption of acknowledged data: recovery
 *   throws `WalCorruptionError` naming the file and offset, and the replica
 *   refuses to start. "Anywhere else" means: in a segment that a later
 *   segment follows; with nonzero bytes farther than `unsyncedBytesMax` past
 *   it; or with a valid record after it when the writer kept one fsync in
 *   flight (with several, a later cycle can land before an earlier one, so
 *   inside the unsynced window that is a tear). Either way, a stretch with a
 *   sector that reads as never written (all zeros up to a sector boundary)
 *   is a write torn by sectors, which a power cut may leave in any order, and
 *   is cut. Losing entries up to the recovered commit index is refused too.
 * - A snapshot file that fails its checksum is skipped for the previous one,
 *   provided the log still connects to that one (compaction keeps the log
 *   back to the oldest kept snapshot for exactly this).
 */
import { LogIndex, Term, assert } from '@fencer/base';
import type { Entry, HardState, Snapshot } from '@fencer/raft';
import { ByteReader, DecodeError, readU32 } from './bytes.js';
import { type Disk, joinPath } from './disk.js';
import { sectorBytes, unsyncedBytesMax } from './limits.js';
import {
  RECORD_HEADER_BYTES,
  RecordKind,
  type ReadRecordResult,
  SEGMENT_HEADER_RECORD_BYTES,
  decodeSegmentHeader,
  isZero,
  lastNonZero,
  findValidRecord,
  readEntryPayload,
  readHardState,
  readRecord,
} from './records.js';
import { decodeSnapshot, parseSnapshotFileName } from './snapshot-file.js';

/** Damage that recovery must not repair silently: the replica refuses to start. */
export class WalCorruptionError extends Error {
  override readonly name = 'WalCorruptionError';
  constructor(
    /** The damaged file's path. */
    readonly file: string,
    /** Byte offset of the first bad record in it. */
    readonly offset: number,
    readonly reason: string,
  ) {
    super(`WAL corruption in ${file} at offset ${offset}: ${reason}`);
  }
}

export function segmentFileName(seq: number): string {
  return `${seq.toString(16).padStart(16, '0')}.wal`;
}

export function parseSegmentFileName(name: string): number | null {
  const m = /^([0-9a-f]{16})\.wal$/.exec(name);
  return m === null ? null : parseInt(m[1]!, 16);
}

export const emptyHardState: HardState = { term: Term(0), vote: null, commit: LogIndex(0) };
export const emptySnapshot: Snapshot = {
  meta: { index: LogIndex(0), term: Term(0), conf: { voters: [], learners: [] } },
  data: new Uint8Array(0),
};

export interface SegmentInfo {
  seq: number;
  /** Highest entry index recorded in the segment (0 when none). */
  maxIndex: number;
}

export interface Recovered {
  hardState: HardState;
  snapshot: Snapshot;
  /** Entries after the snapshot, contiguous from snapshot index + 1. */
  entries: Entry[];
  /** Segments holding the log, oldest first; the last is the one to append to. */
  segments: SegmentInfo[];
  /** Where appending continues; null for an empty directory. */
  active: { seq: number; position: number; crc: number; segmentBytes: number; needsStart: boolean; prevCrc: number } | null;
  /** A preallocated, unused segment after the active one. */
  spare: { seq: number; segmentBytes: number } | null;
  /** Byte ranges (a torn tail) to overwrite with zeros before writing again. */
  zeroRanges: Array<{ name: string; from: number; to: number }>;
  /** Names to delete: temporary files, stale segments, a headerless spare. */
  deletes: string[];
  /** Valid snapshot files, oldest first (the chosen one is the newest). */
  snapshots: Array<{ index: number; name: string }>;
  /** Snapshot files that failed verification or did not connect, with why. */
  skippedSnapshots: Array<{ name: string; reason: string }>;
  /** Where a torn tail was cut, when one was. */
  truncatedAt: { name: string; offset: number; reason: string } | null;
  /**
   * The chosen snapshot does not match the log in the segments (it replaced the log, and its marker
   * record was not durable): the store must write the marker before any new entry, or a later
   * recovery would replay the old entries under the new ones.
   */
  needsMarker: boolean;
}

/** Rebuilds the store's state from `dir`; throws WalCorruptionError on damage it must not repair. */
export function recover(disk: Disk, dir: string): Recovered {
  const names = disk.list(dir);
  const path = (name: string): string => joinPath(dir, name);
  const { run, stale } = findSegmentRun(names);
  // Segments before a gap are leftovers of a compaction whose deletes were not all durable; the
  // snapshot connection check refuses to start if the gap held anything still needed.
  const deletes = [...names.filter((n) => n.endsWith('.tmp')), ...stale.map(segmentFileName)];
  const scan = scanSegments(disk, path, run);
  deletes.push(...scan.deletes);
  refuseSnapshotsWithoutSegments(dir, names, run);
  const { valid, skipped } = loadSnapshots(disk, path, names);
  const choice = chooseSnapshot(scan.replay, valid);
  if (choice === null) {
    const first = run.length > 0 ? path(segmentFileName(scan.segments[0]?.seq ?? run[0]!)) : dir;
    throw new WalCorruptionError(first, 0, `no usable snapshot covers the log before index ${scan.replay.base + 1}`);
  }
  const { snapshot, entries } = choice;
  const hardState = commitCoveringSnapshot(scan.replay.hardState, snapshot);
  refuseLostCommittedEntries(hardState, snapshot, entries, scan, path);
  return {
    hardState,
    snapshot,
    entries,
    segments: scan.segments,
    active: scan.active,
    spare: scan.spare,
    zeroRanges: scan.zeroRanges,
    deletes,
    snapshots: valid.map(({ index, name }) => ({ index, name })).reverse(),
    skippedSnapshots: [...skipped, ...choice.disconnected],
    truncatedAt: scan.truncatedAt,
    needsMarker: choice.needsMarker,
  };
}

// ---- step 1: the run of segments ----

/**
 * The contiguous run of segment numbers ending at the newest (the live log),
 * and the older ones before a gap (stale). Invariant relied on later: the
 * run is strictly consecutive, so segment i + 1 is the one the seal of
 * segment i names.
 */
function findSegmentRun(names: readonly string[]): { run: number[]; stale: number[] } {
  const seqs = names
    .map(parseSegmentFileName)
    .filter((s): s is number => s !== null)
    .sort((a, b) => a - b);
  let runStart = Math.max(seqs.length - 1, 0);
  while (runStart > 0 && seqs[runStart - 1] === seqs[runStart]! - 1) runStart--;
  const run = seqs.slice(runStart);
  for (let k = 1; k < run.length; k++) assert(run[k] === run[k - 1]! + 1, 'the segment run is consecutive');
  return { run, stale: seqs.slice(0, runStart) };
}

// ---- step 2: replay of records into a log ----

/**
 * The log as the records replayed so far describe it: entries
 * `base + 1 .. last`, the latest hard state, and how the writer of the tail
 * ran. Invariant: entries[k].index === base + 1 + k.
 */
class Replay {
  hardState: HardState = emptyHardState;
  entries: Entry[] = [];
  base = 0;
  /** Term of entry `base`; null when unknown (the log's start was compacted below a matching snapshot). */
  baseTerm: number | null = 0;
  /** Whether `base` is known: the log starts at segment 1, or an entry or marker fixed it. */
  baseKnown: boolean;
  /** Cycles in flight of the run that wrote the tail (its last Writer record). */
  writerSyncs = 1;

  constructor(startsAtFirstSegment: boolean) {
    this.baseKnown = startsAtFirstSegment;
    if (!startsAtFirstSegment) this.baseTerm = null;
  }

  get last(): number {
    return this.base + this.entries.length;
  }

  /** Term of entry `index`: undefined outside the known log, null for an unknown base term. */
  termAt(index: number): number | null | undefined {
    if (!this.baseKnown || index < this.base || index > this.last) return undefined;
    return index === this.base ? this.baseTerm : this.entries[index - this.base - 1]!.term;
  }

  /** An entry record: appends, overwrites a suffix (Raft §5.3), or restarts a compacted log. */
  appendEntry(e: Entry, file: string, offset: number): void {
    const last = this.last;
    if (!this.baseKnown && this.entries.length === 0) {
      this.base = e.index - 1;
      this.baseKnown = true;
    }
    if (e.index === this.last + 1) this.entries.push(e);
    else if (e.index > this.base && e.index <= last) {
      this.entries.length = e.index - this.base - 1;
      this.entries.push(e);
    } else if (e.index <= this.base) {
      // A rewrite below where this run of segments starts: the older part is compacted away.
      this.entries = [e];
      this.base = e.index - 1;
      this.baseTerm = null;
    } else {
      throw new WalCorruptionError(file, offset, `entry ${e.index} leaves a gap after ${last}`);
    }
    assert(this.entries[this.entries.length - 1] === e && e.index === this.last, 'the entry just replayed ends the log');
  }

  /**
   * Raft's snapshot install (§7): keep the entries after the snapshot if the
   * log holds its last entry (same index and term), else discard the whole log.
   */
  installMarker(index: number, term: number): void {
    const termAt = this.termAt(index);
    this.entries = termAt === term || (termAt === null && index === this.base) ? this.entries.slice(index - this.base) : [];
    this.base = index;
    this.baseTerm = term;
    this.baseKnown = true;
  }
}

/** One segment file being replayed. */
interface SegmentFile {
  readonly name: string;
  readonly file: string;
  readonly buf: Uint8Array;
  readonly info: SegmentInfo;
}

/** How the replay of one segment ended: at its seal, or at the first record that does not read. */
type SegmentEnd =
  | { readonly sealed: true; readonly pos: number; readonly sealCrc: number }
  | {
      readonly sealed: false;
      readonly pos: number;
      readonly crc: number;
      readonly needsStart: boolean;
      readonly reason: string;
      readonly zero: boolean;
    };

interface SegmentScan {
  readonly replay: Replay;
  readonly segments: SegmentInfo[];
  active: Recovered['active'];
  spare: Recovered['spare'];
  readonly zeroRanges: Recovered['zeroRanges'];
  truncatedAt: Recovered['truncatedAt'];
  readonly deletes: string[];
}

/**
 * Replays the run oldest first. Every segment but the active one must end
 * in a seal naming its successor (the writer seals only after the next
 * segment is durable); the active one ends at its torn or clean tail, and at
 * most the preallocated spare follows it.
 */
function scanSegments(disk: Disk, path: (name: string) => string, run: readonly number[]): SegmentScan {
  const scan: SegmentScan = {
    replay: new Replay(run.length === 0 || run[0] === 1),
    segments: [],
    active: null,
    spare: null,
    zeroRanges: [],
    truncatedAt: null,
    deletes: [],
  };
  let prevSealCrc: number | null = null;
  for (let i = 0; i < run.length; i++) {
    const seq = run[i]!;
    const name = segmentFileName(seq);
    const seg: SegmentFile = { name, file: path(name), buf: disk.read(path(name)), info: { seq, maxIndex: 0 } };
    // Invariant: every segment before this one ended in a seal, so this one continues the log.
    assert(i === 0 || prevSealCrc !== null, 'a segment after the first follows a seal');
    const header = readSegmentHeader(seg, seq);
    scan.segments.push(seg.info);
    const end = replaySegment(scan.replay, seg, header, prevSealCrc);
    if (!end.sealed) {
      const next =
        run[i + 1] === undefined ? null : { name: segmentFileName(run[i + 1]!), buf: disk.read(path(segmentFileName(run[i + 1]!))) };
      cutTail(scan, seg, end, next);
      scan.active = {
        seq,
        position: end.pos,
        crc: end.crc,
        segmentBytes: seg.buf.length,
        needsStart: end.needsStart,
        prevCrc: end.needsStart ? (prevSealCrc ?? 0) : 0,
      };
      if (next !== null) adoptSpare(scan, run, i + 1, next, path);
      return scan;
    }
    prevSealCrc = end.sealCrc;
    if (i === run.length - 1)
      throw new WalCorruptionError(seg.file, end.pos, `sealed, but the next segment ${segmentFileName(seq + 1)} is missing`);
  }
  assert(run.length === 0, 'a non-empty run ends at an active segment');
  return scan;
}

/**
 * Every segment is created under a temporary name and gets its final name
 * only after its header is durable, so a bad header is damage.
 */
function readSegmentHeader(seg: SegmentFile, seq: number): { end: number; crc: number } {
  const header = readRecord(seg.buf, 0, 0, seg.buf.length);
  if (!header.ok) throw new WalCorruptionError(seg.file, 0, `bad segment header: ${header.reason}`);
  let seqOk = false;
  if (header.kind === RecordKind.SegmentHeader) {
    try {
      seqOk = decodeSegmentHeader(new ByteReader(seg.buf, header.payloadStart, header.end)).seq === seq;
    } catch (err) {
      if (!(err instanceof DecodeError)) throw err;
    }
  }
  if (!seqOk) throw new WalCorruptionError(seg.file, 0, 'bad segment header');
  return { end: header.end, crc: header.crc };
}

/** Reads records from just after the header until the seal or the first record that does not read. */
function replaySegment(replay: Replay, seg: SegmentFile, header: { end: number; crc: number }, prevSealCrc: number | null): SegmentEnd {
  let pos = header.end;
  let seed = header.crc;
  let needsStart = true;
  for (;;) {
    const r = readRecord(seg.buf, pos, seed, seg.buf.length);
    if (!r.ok) return { sealed: false, pos, crc: seed, needsStart, reason: r.reason, zero: r.zero };
    // Each record reads forward: the loop ends within buf.length / RECORD_HEADER_BYTES steps.
    assert(r.end >= pos + RECORD_HEADER_BYTES, 'a record moves the position forward');
    const sealed = applyRecord(replay, seg, r, pos, needsStart, prevSealCrc);
    needsStart = false;
    seed = r.crc;
    pos = r.end;
    if (sealed) return { sealed: true, pos, sealCrc: r.crc };
  }
}

/**
 * Applies one checksummed record to the replay; returns whether it is the
 * seal. A record with a valid checksum but a bad payload was written that
 * way (a bug or tampering): corruption, never a tear.
 */
function applyRecord(
  replay: Replay,
  seg: SegmentFile,
  r: Extract<ReadRecordResult, { ok: true }>,
  pos: number,
  expectStart: boolean,
  prevSealCrc: number | null,
): boolean {
  const rd = new ByteReader(seg.buf, r.payloadStart, r.end);
  let sealed = false;
  try {
    if (expectStart !== (r.kind === RecordKind.Start)) {
      throw new DecodeError(expectStart ? `expected a start record, found kind ${r.kind}` : 'start record in the middle of a segment');
    }
    switch (r.kind) {
      case RecordKind.Start: {
        const prevCrc = rd.u32();
        if (prevSealCrc !== null && prevCrc !== prevSealCrc)
          throw new DecodeError(`start record links to checksum ${prevCrc}, previous seal has ${prevSealCrc}`);
        replay.hardState = readHardState(rd);
        break;
      }
      case RecordKind.Entry: {
        const e = readEntryPayload(rd);
        replay.appendEntry(e, seg.file, pos);
        seg.info.maxIndex = Math.max(seg.info.maxIndex, e.index);
        break;
      }
      case RecordKind.HardState:
        replay.hardState = readHardState(rd);
        break;
      case RecordKind.SnapshotMarker:
        replay.installMarker(rd.u64(), rd.u64());
        break;
      case RecordKind.Seal: {
        const nextSeq = rd.u64();
        if (nextSeq !== seg.info.seq + 1) throw new DecodeError(`seal names segment ${nextSeq}, expected ${seg.info.seq + 1}`);
        sealed = true;
        break;
      }
      case RecordKind.Writer:
        replay.writerSyncs = rd.u8();
        if (replay.writerSyncs < 1) throw new DecodeError('writer record with no cycles in flight');
        break;
      case RecordKind.SegmentHeader:
        throw new DecodeError('segment header in the middle of a segment');
    }
    rd.done();
  } catch (err) {
    if (!(err instanceof DecodeError)) throw err;
    throw new WalCorruptionError(seg.file, pos, err.message);
  }
  return sealed;
}

// ---- step 3: the tail of the active segment, torn or corrupt ----

function segmentHasData(buf: Uint8Array): boolean {
  return !isZero(buf, SEGMENT_HEADER_RECORD_BYTES, buf.length);
}

/**
 * Decides whether the first unreadable record of the active segment is the
 * end of what was written (a clean or torn tail, cut by zeroing) or damage
 * to acknowledged data (thrown). Relies on: the writer never has more than
 * `unsyncedBytesMax` bytes past its last fsync, and never writes into a
 * segment before the previous one's seal is durable.
 */
function cutTail(
  scan: SegmentScan,
  seg: SegmentFile,
  end: Extract<SegmentEnd, { sealed: false }>,
  next: { name: string; buf: Uint8Array } | null,
): void {
  const { buf, file, name } = seg;
  const pos = end.pos;
  if (next !== null && segmentHasData(next.buf))
    throw new WalCorruptionError(file, pos, `${end.reason}; the log continues in ${next.name}`);
  const dirty = lastNonZero(buf, pos, buf.length);
  if (dirty >= pos + unsyncedBytesMax) {
    throw new WalCorruptionError(file, pos, `${end.reason}; data continues to offset ${dirty}, beyond any unsynced write`);
  }
  const later = findValidRecord(buf, pos + 1, dirty, buf.length);
  const reason = later >= 0 ? judgeLaterRecord(scan.replay.writerSyncs, seg, end, later) : end.reason;
  if (dirty >= pos) {
    scan.zeroRanges.push({ name, from: pos, to: dirty + 1 });
    scan.truncatedAt = { name, offset: pos, reason };
  }
}

/**
 * A valid record after the bad one. With one cycle in flight, bytes land in
 * write order, short of a torn write: so it means damage to written data,
 * unless a sector of the bad stretch was never written (a write torn by
 * sectors, which may land in any order). With more cycles, a later cycle may
 * have landed without an earlier one, which inside the unsynced window is a
 * tear; unless the bad record is whole but for its own content (its
 * successor sits right after it and links to its stored checksum): then it
 * was written, and damaged since, again short of an unwritten sector.
 * Returns the reason for the cut, or throws.
 */
function judgeLaterRecord(writerSyncs: number, seg: SegmentFile, end: Extract<SegmentEnd, { sealed: false }>, later: number): string {
  const { buf, file } = seg;
  const pos = end.pos;
  assert(later > pos, 'the later record starts after the bad one');
  const tornBySectors = `${end.reason}; part of it is a sector the write never reached, so records from offset ${later} are discarded as a torn write`;
  if (writerSyncs === 1) {
    if (hasUnwrittenSector(buf, pos, later)) return tornBySectors;
    throw new WalCorruptionError(file, pos, `${end.reason}; a valid record follows at offset ${later}`);
  }
  const stored = readU32(buf, pos);
  const recordEnd = pos + RECORD_HEADER_BYTES + readU32(buf, pos + 4);
  if (!end.zero && later === recordEnd && readU32(buf, later + 12) === stored) {
    if (hasUnwrittenSector(buf, pos, later)) return tornBySectors;
    throw new WalCorruptionError(file, pos, `${end.reason}; the next record follows it in place`);
  }
  return `${end.reason}; discarded records from offset ${later} written by a later cycle in flight at the crash`;
}

/**
 * Whether [from, to) holds a sector the last write never reached: a piece
 * of it that ends on a sector boundary and reads as zeros (segments are
 * zero-filled before any record is written). Only pieces ending on a
 * boundary count: a sector holding the valid record at `to` did land.
 * Written records are never zero across a whole sector's piece, as each
 * starts with a nonzero header, except entry data that is itself a zero
 * sector; such an entry, damaged besides, is cut as torn rather than refused.
 */
function hasUnwrittenSector(buf: Uint8Array, from: number, to: number): boolean {
  for (let at = from; at < to;) {
    const sectorEnd = (Math.floor(at / sectorBytes) + 1) * sectorBytes;
    if (sectorEnd > to) return false;
    if (isZero(buf, at, sectorEnd)) return true;
    at = sectorEnd;
  }
  return false;
}

/** After the active segment only the preallocated spare may follow: adopted when its header is whole, else deleted. */
function adoptSpare(
  scan: SegmentScan,
  run: readonly number[],
  at: number,
  next: { name: string; buf: Uint8Array },
  path: (name: string) => string,
): void {
  if (at + 1 < run.length) throw new WalCorruptionError(path(segmentFileName(run[at + 1]!)), 0, 'segment follows the unused spare');
  const h = readRecord(next.buf, 0, 0, next.buf.length);
  if (h.ok && h.kind === RecordKind.SegmentHeader) scan.spare = { seq: run[at]!, segmentBytes: next.buf.length };
  else scan.deletes.push(next.name);
}

// ---- step 4: snapshots ----

function refuseSnapshotsWithoutSegments(dir: string, names: readonly string[], run: readonly number[]): void {
  if (run.length === 0 && names.some((n) => parseSnapshotFileName(n) !== null)) {
    // Every store writes its first segment before any snapshot: the log's directory entries are lost.
    throw new WalCorruptionError(dir, 0, 'snapshot files but no log segment (hard state and log are missing)');
  }
}

interface ValidSnapshot {
  index: number;
  name: string;
  snapshot: Snapshot;
}

/** Snapshot files that verify, newest first, and those that do not, with why. */
function loadSnapshots(
  disk: Disk,
  path: (name: string) => string,
  names: readonly string[],
): { valid: ValidSnapshot[]; skipped: Recovered['skippedSnapshots'] } {
  const snapNames = names
    .map((n) => ({ name: n, index: parseSnapshotFileName(n) }))
    .filter((s): s is { name: string; index: number } => s.index !== null)
    .sort((a, b) => b.index - a.index);
  const skipped: Recovered['skippedSnapshots'] = [];
  const valid: ValidSnapshot[] = [];
  for (const s of snapNames) {
    try {
      const snapshot = decodeSnapshot(disk.read(path(s.name)));
      if (snapshot.meta.index !== s.index) throw new DecodeError(`file name says index ${s.index}, content ${snapshot.meta.index}`);
      valid.push({ ...s, snapshot });
    } catch (err) {
      if (!(err instanceof DecodeError)) throw err;
      skipped.push({ name: s.name, reason: err.message });
    }
  }
  return { valid, skipped };
}

/**
 * The newest valid snapshot the log connects to (the empty one when none is
 * needed), with the entries after it; null when none covers the log's start.
 */
function chooseSnapshot(
  replay: Replay,
  valid: readonly ValidSnapshot[],
): { snapshot: Snapshot; entries: Entry[]; needsMarker: boolean; disconnected: Recovered['skippedSnapshots'] } | null {
  const disconnected: Recovered['skippedSnapshots'] = [];
  const chosen = (snapshot: Snapshot, entries: Entry[]) => {
    const termAt = replay.termAt(snapshot.meta.index);
    assert(entries.length === 0 || entries[0]!.index === snapshot.meta.index + 1, 'entries start right after the snapshot');
    // Unknown (null): the log's start was compacted below a snapshot that matched it.
    return { snapshot, entries, needsMarker: termAt !== snapshot.meta.term && termAt !== null, disconnected };
  };
  for (const snap of [...valid.map((v) => v.snapshot), emptySnapshot]) {
    const at = snap.meta.index;
    if (!replay.baseKnown) {
      // Compacted segments and no entry since: only a real snapshot can stand for what was deleted.
      if (snap === emptySnapshot) continue;
      return chosen(snap, []);
    }
    if (at < replay.base) {
      if (snap !== emptySnapshot)
        disconnected.push({ name: `snapshot at ${at}`, reason: `the log starts at ${replay.base + 1}, after it` });
      continue;
    }
    const termAt = replay.termAt(at);
    // A term mismatch means a snapshot replaced a divergent log and its marker is not durable:
    // then nothing after it was acknowledged either, so the old tail goes.
    return chosen(snap, at < replay.last && (termAt === null || termAt === snap.meta.term) ? replay.entries.slice(at - replay.base) : []);
  }
  return null;
}

// ---- step 5: the commit index against what was recovered ----

/**
 * A snapshot holds only committed entries: its index is a commit index even
 * if no hard state record saying so was durable (Raft cores such as etcd's
 * refuse a commit below the snapshot).
 */
function commitCoveringSnapshot(hardState: HardState, snapshot: Snapshot): HardState {
  return hardState.commit < snapshot.meta.index ? { ...hardState, commit: snapshot.meta.index } : hardState;
}

/** Losing an entry up to the recovered commit index is losing acknowledged data. */
function refuseLostCommittedEntries(
  hardState: HardState,
  snapshot: Snapshot,
  entries: readonly Entry[],
  scan: SegmentScan,
  path: (name: string) => string,
): void {
  const lastIndex = snapshot.meta.index + entries.length;
  if (hardState.commit <= lastIndex) return;
  const where = scan.truncatedAt ?? { name: segmentFileName(scan.active?.seq ?? 0), offset: scan.active?.position ?? 0 };
  throw new WalCorruptionError(
    path(where.name),
    where.offset,
    `commit index ${hardState.commit} is beyond the recovered log's end ${lastIndex}`,
  );
}
