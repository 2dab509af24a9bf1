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
 *   inside the unsynced window that is a tear). Losing entries up to the
 *   recovered commit index is refused too.
 * - A snapshot file that fails its checksum is skipped for the previous one,
 *   provided the log still connects to that one (compaction keeps the log
 *   back to the oldest kept snapshot for exactly this).
 */
import { LogIndex, Term, assert } from '@fencer/base';
import type { Entry, HardState, Snapshot } from '@fencer/raft';
import { ByteReader, DecodeError, readU32 } from './bytes.js';
import { type Disk, joinPath } from './disk.js';
import { unsyncedBytesMax } from './limits.js';
import {
  RECORD_HEADER_BYTES,
  RecordKind,
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
export const emptySnapshot: Snapshot = { meta: { index: LogIndex(0), term: Term(0), conf: { voters: [], learners: [] } }, data: new Uint8Array(0) };

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
  const deletes = names.filter((n) => n.endsWith('.tmp'));
  const path = (name: string): string => joinPath(dir, name);

  // ---- segments: the contiguous run ending at the newest ----
  const seqs = names
    .map(parseSegmentFileName)
    .filter((s): s is number => s !== null)
    .sort((a, b) => a - b);
  let runStart = seqs.length - 1;
  while (runStart > 0 && seqs[runStart - 1] === seqs[runStart]! - 1) runStart--;
  // Segments before a gap are leftovers of a compaction whose deletes were not all durable; the
  // snapshot connection check below refuses to start if the gap held anything still needed.
  for (const s of seqs.slice(0, Math.max(runStart, 0))) deletes.push(segmentFileName(s));
  const run = seqs.slice(Math.max(runStart, 0));

  let hardState = emptyHardState;
  let log: Entry[] = [];
  let base = 0;
  let baseTerm: number | null = 0;
  // Whether `base` is known: the log starts at segment 1, or a replacing snapshot reset it.
  let baseKnown = run.length === 0 || run[0] === 1;
  if (!baseKnown) baseTerm = null;
  const segments: SegmentInfo[] = [];
  let active: Recovered['active'] = null;
  let spare: Recovered['spare'] = null;
  const zeroRanges: Recovered['zeroRanges'] = [];
  let truncatedAt: Recovered['truncatedAt'] = null;
  let prevSealCrc: number | null = null;
  /** Cycles in flight of the run that wrote the tail (its last Writer record). */
  let writerSyncs = 1;

  const applyEntry = (e: Entry, name: string, at: number): void => {
    const last = base + log.length;
    if (!baseKnown && log.length === 0) {
      base = e.index - 1;
      baseKnown = true;
    }
    if (e.index === base + log.length + 1) log.push(e);
    else if (e.index > base && e.index <= last) {
      log.length = e.index - base - 1;
      log.push(e);
    } else if (e.index <= base) {
      // A rewrite below where this run of segments starts: the older part is compacted away.
      log = [e];
      base = e.index - 1;
      baseTerm = null;
    } else {
      throw new WalCorruptionError(path(name), at, `entry ${e.index} leaves a gap after ${last}`);
    }
  };

  const segmentHasData = (buf: Uint8Array): boolean => !isZero(buf, SEGMENT_HEADER_RECORD_BYTES, buf.length);

  for (let i = 0; i < run.length; i++) {
    const seq = run[i]!;
    const name = segmentFileName(seq);
    const buf = disk.read(path(name));
    const isLast = i === run.length - 1;
    const prevSealed = prevSealCrc !== null;
    const header = readRecord(buf, 0, 0, buf.length);
    let headerOk = header.ok && header.kind === RecordKind.SegmentHeader;
    if (header.ok && headerOk) {
      try {
        headerOk = decodeSegmentHeader(new ByteReader(buf, header.payloadStart, header.end)).seq === seq;
      } catch (err) {
        if (!(err instanceof DecodeError)) throw err;
        headerOk = false;
      }
    }
    if (!headerOk || !header.ok) {
      // Every segment is created under a temporary name and gets its final name only after its
      // header is durable, so a bad header is damage, except for an all-zero unused spare.
      if (isLast && !prevSealed && i > 0 && isZero(buf, 0, buf.length)) {
        deletes.push(name);
        break;
      }
      throw new WalCorruptionError(path(name), 0, `bad segment header${header.ok ? '' : `: ${header.reason}`}`);
    }
    if (i > 0 && !prevSealed) {
      // The previous segment ended without a seal: this is the preallocated spare, which holds no data.
      if (segmentHasData(buf)) {
        const prev = segmentFileName(run[i - 1]!);
        throw new WalCorruptionError(path(prev), 0, `segment ends without a seal, but ${name} holds data`);
      }
      if (!isLast) throw new WalCorruptionError(path(segmentFileName(run[i + 1]!)), 0, `segment follows the unused spare ${name}`);
      spare = { seq, segmentBytes: buf.length };
      break;
    }

    const info: SegmentInfo = { seq, maxIndex: 0 };
    segments.push(info);
    let pos = header.end;
    let seed = header.crc;
    let expectStart = true;
    let sealed = false;
    let sealCrc = 0;
    for (;;) {
      const r = readRecord(buf, pos, seed, buf.length);
      if (!r.ok) {
        // The end of the written log, or damage: decide which.
        const next = run[i + 1];
        if (next !== undefined) {
          const nextBuf = disk.read(path(segmentFileName(next)));
          if (segmentHasData(nextBuf)) throw new WalCorruptionError(path(name), pos, `${r.reason}; the log continues in ${segmentFileName(next)}`);
        }
        const dirty = lastNonZero(buf, pos, buf.length);
        if (dirty >= pos + unsyncedBytesMax) {
          throw new WalCorruptionError(path(name), pos, `${r.reason}; data continues to offset ${dirty}, beyond any unsynced write`);
        }
        const later = findValidRecord(buf, pos + 1, dirty, buf.length);
        let reason = r.reason;
        if (later >= 0) {
          // With one cycle in flight, bytes land in order (short of a torn write, which leaves no valid
          // record behind it): a valid record after a bad one means damage to written data. With more,
          // a later cycle may have landed without an earlier one, which inside the unsynced window is a
          // tear; unless the bad record is whole but for its own content (its successor sits right
          // after it and links to its stored checksum): then it was written, and damaged since.
          if (writerSyncs === 1) throw new WalCorruptionError(path(name), pos, `${r.reason}; a valid record follows at offset ${later}`);
          const stored = readU32(buf, pos);
          const end = pos + RECORD_HEADER_BYTES + readU32(buf, pos + 4);
          if (!r.zero && later === end && readU32(buf, later + 12) === stored) {
            throw new WalCorruptionError(path(name), pos, `${r.reason}; the next record follows it in place`);
          }
          reason = `${r.reason}; discarded records from offset ${later} written by a later cycle in flight at the crash`;
        }
        if (dirty >= pos) {
          zeroRanges.push({ name, from: pos, to: dirty + 1 });
          truncatedAt = { name, offset: pos, reason };
        }
        active = { seq, position: pos, crc: seed, segmentBytes: buf.length, needsStart: expectStart, prevCrc: expectStart ? (prevSealCrc ?? 0) : 0 };
        break;
      }
      const rd = new ByteReader(buf, r.payloadStart, r.end);
      try {
        if (expectStart !== (r.kind === RecordKind.Start)) {
          throw new DecodeError(expectStart ? `expected a start record, found kind ${r.kind}` : 'start record in the middle of a segment');
        }
        switch (r.kind) {
          case RecordKind.Start: {
            const prevCrc = rd.u32();
            if (prevSealCrc !== null && prevCrc !== prevSealCrc) throw new DecodeError(`start record links to checksum ${prevCrc}, previous seal has ${prevSealCrc}`);
            hardState = readHardState(rd);
            expectStart = false;
            break;
          }
          case RecordKind.Entry: {
            const e = readEntryPayload(rd);
            applyEntry(e, name, pos);
            info.maxIndex = Math.max(info.maxIndex, e.index);
            break;
          }
          case RecordKind.HardState:
            hardState = readHardState(rd);
            break;
          case RecordKind.SnapshotMarker: {
            // Raft's snapshot install (§7): keep the entries after the snapshot if the log holds its
            // last entry (same index and term), else discard the whole log.
            const index = rd.u64();
            const term = rd.u64();
            const last = base + log.length;
            const termAt = !baseKnown || index < base || index > last ? undefined : index === base ? baseTerm : log[index - base - 1]!.term;
            log = termAt === term || (termAt === null && index === base) ? log.slice(index - base) : [];
            base = index;
            baseTerm = term;
            baseKnown = true;
            break;
          }
          case RecordKind.Seal: {
            const nextSeq = rd.u64();
            if (nextSeq !== seq + 1) throw new DecodeError(`seal names segment ${nextSeq}, expected ${seq + 1}`);
            sealed = true;
            sealCrc = r.crc;
            break;
          }
          case RecordKind.Writer:
            writerSyncs = rd.u8();
            if (writerSyncs < 1) throw new DecodeError('writer record with no cycles in flight');
            break;
          case RecordKind.SegmentHeader:
            throw new DecodeError('segment header in the middle of a segment');
        }
        rd.done();
      } catch (err) {
        if (!(err instanceof DecodeError)) throw err;
        // A record with a valid checksum but a bad payload was written that way: a bug or tampering.
        throw new WalCorruptionError(path(name), pos, err.message);
      }
      seed = r.crc;
      pos = r.end;
      if (sealed) break;
    }
    if (active !== null) {
      // Anything after the active segment must be the spare.
      const next = run[i + 1];
      if (next !== undefined) {
        const nextBuf = disk.read(path(segmentFileName(next)));
        const h = readRecord(nextBuf, 0, 0, nextBuf.length);
        if (i + 2 < run.length) throw new WalCorruptionError(path(segmentFileName(run[i + 2]!)), 0, 'segment follows the unused spare');
        if (h.ok && h.kind === RecordKind.SegmentHeader) spare = { seq: next, segmentBytes: nextBuf.length };
        else deletes.push(segmentFileName(next));
      }
      break;
    }
    assert(sealed, 'a segment parse ends at the tail or at a seal');
    prevSealCrc = sealCrc;
    if (isLast) throw new WalCorruptionError(path(name), pos, `sealed, but the next segment ${segmentFileName(seq + 1)} is missing`);
  }

  if (run.length === 0 && names.some((n) => parseSnapshotFileName(n) !== null)) {
    // Every store writes its first segment before any snapshot: the log's directory entries are lost.
    throw new WalCorruptionError(dir, 0, 'snapshot files but no log segment (hard state and log are missing)');
  }

  // ---- snapshots: the newest valid one the log connects to ----
  const snapNames = names
    .map((n) => ({ name: n, index: parseSnapshotFileName(n) }))
    .filter((s): s is { name: string; index: number } => s.index !== null)
    .sort((a, b) => b.index - a.index);
  const skippedSnapshots: Recovered['skippedSnapshots'] = [];
  const valid: Array<{ index: number; name: string; snapshot: Snapshot }> = [];
  for (const s of snapNames) {
    try {
      const snapshot = decodeSnapshot(disk.read(path(s.name)));
      if (snapshot.meta.index !== s.index) throw new DecodeError(`file name says index ${s.index}, content ${snapshot.meta.index}`);
      valid.push({ ...s, snapshot });
    } catch (err) {
      if (!(err instanceof DecodeError)) throw err;
      skippedSnapshots.push({ name: s.name, reason: err.message });
    }
  }

  const last = base + log.length;
  let chosen: Snapshot | null = null;
  let entries: Entry[] = [];
  for (const snap of [...valid.map((v) => v.snapshot), emptySnapshot]) {
    const at = snap.meta.index;
    if (!baseKnown) {
      // Compacted segments and no entry since: only a real snapshot can stand for what was deleted.
      if (snap === emptySnapshot) continue;
      chosen = snap;
      break;
    }
    if (at < base) {
      if (snap !== emptySnapshot) skippedSnapshots.push({ name: `snapshot at ${at}`, reason: `the log starts at ${base + 1}, after it` });
      continue;
    }
    chosen = snap;
    if (at < last) {
      const termAt = at === base ? baseTerm : log[at - base - 1]!.term;
      // A term mismatch means a snapshot replaced a divergent log and its marker is not durable:
      // then nothing after it was acknowledged either, so the old tail goes.
      if (termAt === null || termAt === snap.meta.term) entries = log.slice(at - base);
    }
    break;
  }
  let needsMarker = false;
  if (chosen !== null) {
    const at = chosen.meta.index;
    const termAt = !baseKnown || at < base || at > last ? undefined : at === base ? baseTerm : log[at - base - 1]!.term;
    // Unknown (null): the log's start was compacted below a snapshot that matched it.
    needsMarker = termAt !== chosen.meta.term && termAt !== null;
  }
  if (chosen === null) {
    const first = run.length > 0 ? path(segmentFileName(segments[0]?.seq ?? run[0]!)) : dir;
    throw new WalCorruptionError(first, 0, `no usable snapshot covers the log before index ${base + 1}`);
  }
  // A snapshot holds only committed entries: its index is a commit index even if no hard state
  // record saying so was durable (Raft cores such as etcd's refuse a commit below the snapshot).
  if (hardState.commit < chosen.meta.index) hardState = { ...hardState, commit: chosen.meta.index };
  const lastIndex = chosen.meta.index + entries.length;
  if (hardState.commit > lastIndex) {
    const where = truncatedAt ?? { name: segmentFileName(active?.seq ?? 0), offset: active?.position ?? 0 };
    throw new WalCorruptionError(path(where.name), where.offset, `commit index ${hardState.commit} is beyond the recovered log's end ${lastIndex}`);
  }
  assert(entries.length === 0 || entries[0]!.index === chosen.meta.index + 1, 'entries start right after the snapshot');

  return {
    hardState,
    snapshot: chosen,
    entries,
    segments,
    active,
    spare,
    zeroRanges,
    deletes,
    snapshots: valid.map(({ index, name }) => ({ index, name })).reverse(),
    skippedSnapshots,
    truncatedAt,
    needsMarker,
  };
}
