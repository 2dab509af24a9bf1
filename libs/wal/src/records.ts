/**
 * WAL record framing. Every record is
 *
 *   u32 crc | u32 payloadLength | u8 kind | 3 zero bytes | u32 prevCrc | payload
 *
 * where crc is CRC-32C over everything after the crc field, and prevCrc is
 * the previous record's crc (0 for a segment header; a segment's start
 * record carries the previous segment's last crc in its payload). So each
 * record verifies on its own, which lets recovery look past a damaged record
 * for valid ones (proof that the damage is not a torn tail), and the chain
 * catches a record that is intact but out of place: a stale record from an
 * older write, a misdirected write, a segment swapped for another. Sixteen
 * zero bytes (kind 0) never form a valid record: they mark the preallocated,
 * never-written rest of a segment.
 */
import type { LogIndex, NodeId, Term } from '@fencer/base';
import { LogIndex as toLogIndex, NodeId as toNodeId, Term as toTerm, assert } from '@fencer/base';
import type { Entry, EntryType, HardState } from '@fencer/raft';
import { ByteReader, ByteWriter, DecodeError, readU32, writeU32 } from './bytes.js';
import { crc32c } from './crc32c.js';

export const RECORD_HEADER_BYTES = 16;

export const RecordKind = {
  /** First record of every segment, written before the segment gets its final name. */
  SegmentHeader: 1,
  /** First record after the header once the segment is in use: links the crc chain to the previous segment and carries the hard state. */
  Start: 2,
  Entry: 3,
  HardState: 4,
  /** A snapshot that replaced the log (it did not match the log's entry at its index). */
  SnapshotMarker: 5,
  /** Last record of a full segment; the log continues in segment nextSeq. */
  Seal: 6,
  /**
   * Written at every open: how many write+fsync cycles this writer keeps in
   * flight. With more than one, a crash may persist a later cycle's bytes
   * and not an earlier one's, and recovery must read such a gap as torn.
   */
  Writer: 7,
} as const;
export type RecordKind = (typeof RecordKind)[keyof typeof RecordKind];

const kindMax = RecordKind.Writer;

export const SEGMENT_MAGIC = 0x4c415746; // "FWAL" little-endian
export const SEGMENT_VERSION = 1;
export const SEGMENT_HEADER_RECORD_BYTES = RECORD_HEADER_BYTES + 24;
export const SEAL_RECORD_BYTES = RECORD_HEADER_BYTES + 8;

/** Starts a record in `w` chained after the record whose crc is prevCrc; returns its start for endRecord. */
export function beginRecord(w: ByteWriter, kind: RecordKind, prevCrc: number): number {
  const start = w.length;
  w.reserve(RECORD_HEADER_BYTES);
  w.buf.fill(0, start, start + 12);
  w.buf[start + 8] = kind;
  writeU32(w.buf, start + 12, prevCrc);
  w.length += RECORD_HEADER_BYTES;
  return start;
}

/** Fills in length and crc of the record begun at `start`; returns its crc. */
export function endRecord(w: ByteWriter, start: number): number {
  const payloadBytes = w.length - start - RECORD_HEADER_BYTES;
  writeU32(w.buf, start + 4, payloadBytes);
  const crc = crc32c(w.buf, 0, start + 4, w.length);
  writeU32(w.buf, start, crc);
  return crc;
}

export type ReadRecordResult =
  { ok: true; kind: RecordKind; payloadStart: number; end: number; crc: number } | { ok: false; zero: boolean; reason: string };

/**
 * Reads and verifies the record at `at` (bytes [at, limit) belong to the
 * segment); `prevCrc` is the crc it must chain from, or null to check the
 * record on its own.
 */
export function readRecord(buf: Uint8Array, at: number, prevCrc: number | null, limit: number): ReadRecordResult {
  if (at + RECORD_HEADER_BYTES > limit)
    return { ok: false, zero: isZero(buf, at, limit), reason: 'record header runs past the end of the segment' };
  if (isZero(buf, at, at + RECORD_HEADER_BYTES)) return { ok: false, zero: true, reason: 'zero record header (end of written data)' };
  const storedCrc = readU32(buf, at);
  const length = readU32(buf, at + 4);
  const kind = buf[at + 8]!;
  if (kind === 0 || kind > kindMax) return { ok: false, zero: false, reason: `unknown record kind ${kind}` };
  if (buf[at + 9] !== 0 || buf[at + 10] !== 0 || buf[at + 11] !== 0)
    return { ok: false, zero: false, reason: 'nonzero reserved header bytes' };
  const end = at + RECORD_HEADER_BYTES + length;
  if (end > limit) return { ok: false, zero: false, reason: `record length ${length} runs past the end of the segment` };
  const crc = crc32c(buf, 0, at + 4, end);
  if (crc !== storedCrc) return { ok: false, zero: false, reason: `checksum mismatch (stored ${hex(storedCrc)}, computed ${hex(crc)})` };
  const linked = readU32(buf, at + 12);
  if (prevCrc !== null && linked !== prevCrc)
    return { ok: false, zero: false, reason: `chain broken: record follows ${hex(linked)}, previous record is ${hex(prevCrc)}` };
  return { ok: true, kind: kind as RecordKind, payloadStart: at + RECORD_HEADER_BYTES, end, crc };
}

/**
 * Offset of the first record starting in [from, lastStart] that verifies on
 * its own (within [.., limit)), or -1. Recovery uses it after a bad record:
 * a valid record later on was written after the damaged one, so the damage
 * is not a torn tail.
 */
export function findValidRecord(buf: Uint8Array, from: number, lastStart: number, limit: number): number {
  for (let p = from; p <= lastStart && p + RECORD_HEADER_BYTES <= limit; p++) {
    const kind = buf[p + 8]!;
    if (kind === 0 || kind > kindMax || buf[p + 9] !== 0 || buf[p + 10] !== 0 || buf[p + 11] !== 0) continue;
    if (p + RECORD_HEADER_BYTES + readU32(buf, p + 4) > limit) continue;
    if (readRecord(buf, p, null, limit).ok) return p;
  }
  return -1;
}

export function isZero(buf: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (buf[i] !== 0) return false;
  return true;
}

/** Index of the last nonzero byte in [from, to), or -1. */
export function lastNonZero(buf: Uint8Array, from: number, to: number): number {
  for (let i = to - 1; i >= from; i--) if (buf[i] !== 0) return i;
  return -1;
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}

// ---- payloads ----

export interface SegmentHeader {
  seq: number;
  segmentBytes: number;
}

/** The header record bytes of a segment; its crc starts a fresh chain. */
export function encodeSegmentHeader(h: SegmentHeader): { bytes: Uint8Array; crc: number } {
  const w = new ByteWriter(SEGMENT_HEADER_RECORD_BYTES);
  const start = beginRecord(w, RecordKind.SegmentHeader, 0);
  w.u32(SEGMENT_MAGIC);
  w.u32(SEGMENT_VERSION);
  w.u64(h.seq);
  w.u64(h.segmentBytes);
  const crc = endRecord(w, start);
  assert(w.length === SEGMENT_HEADER_RECORD_BYTES, 'fixed header size');
  return { bytes: w.view().slice(), crc };
}

export function decodeSegmentHeader(r: ByteReader): SegmentHeader {
  const magic = r.u32();
  if (magic !== SEGMENT_MAGIC) throw new DecodeError(`bad segment magic 0x${magic.toString(16)}`);
  const version = r.u32();
  if (version !== SEGMENT_VERSION) throw new DecodeError(`unsupported segment version ${version}`);
  const h = { seq: r.u64(), segmentBytes: r.u64() };
  r.done();
  return h;
}

export function writeHardState(w: ByteWriter, hs: HardState): void {
  w.u64(hs.term);
  w.u64(hs.commit);
  w.u8(hs.vote === null ? 0 : 1);
  if (hs.vote !== null) w.str(hs.vote);
}

export function readHardState(r: ByteReader): HardState {
  const term = toTerm(r.u64());
  const commit = toLogIndex(r.u64());
  const hasVote = r.u8();
  if (hasVote > 1) throw new DecodeError(`bad vote flag ${hasVote}`);
  const vote: NodeId | null = hasVote === 1 ? toNodeId(r.str()) : null;
  return { term, vote, commit };
}

export function writeEntryPayload(w: ByteWriter, e: Entry): void {
  w.u64(e.index);
  w.u64(e.term);
  w.u8(e.type);
  w.bytes(e.data);
}

export function readEntryPayload(r: ByteReader): Entry {
  const index = toLogIndex(r.u64());
  const term = toTerm(r.u64());
  const type = r.u8();
  if (type > 1) throw new DecodeError(`unknown entry type ${type}`);
  const data = r.bytes(r.remaining);
  return { index, term, type: type as EntryType, data };
}

export const ENTRY_PAYLOAD_OVERHEAD_BYTES = 17;

export interface SnapshotMarker {
  index: LogIndex;
  term: Term;
}
