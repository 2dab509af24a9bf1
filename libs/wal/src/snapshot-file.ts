/**
 * Snapshot file format: one checksummed blob,
 *
 *   u32 magic "FSNP" | u32 version | u64 index | u64 term
 *   | u32 voters, each str | u32 learners, each str
 *   | u64 dataLength | data | u32 crc32c(all of the above)
 *
 * named `snap-<index as 16 hex digits>.snap`, so a directory listing sorts
 * them oldest first.
 */
import { LogIndex, NodeId, Term, assert } from '@fencer/base';
import type { Snapshot } from '@fencer/raft';
import { ByteReader, ByteWriter, DecodeError, readU32 } from './bytes.js';
import { crc32c } from './crc32c.js';

const SNAPSHOT_MAGIC = 0x504e5346; // "FSNP" little-endian
const SNAPSHOT_VERSION = 1;

export const SNAPSHOT_SUFFIX = '.snap';

export function snapshotFileName(index: number): string {
  return `snap-${index.toString(16).padStart(16, '0')}${SNAPSHOT_SUFFIX}`;
}

/** The index a snapshot file name claims, or null when the name is not one of ours. */
export function parseSnapshotFileName(name: string): number | null {
  const m = /^snap-([0-9a-f]{16})\.snap$/.exec(name);
  return m === null ? null : parseInt(m[1]!, 16);
}

export function encodeSnapshot(s: Snapshot): Uint8Array {
  const w = new ByteWriter(64 + s.data.length);
  w.u32(SNAPSHOT_MAGIC);
  w.u32(SNAPSHOT_VERSION);
  w.u64(s.meta.index);
  w.u64(s.meta.term);
  w.u32(s.meta.conf.voters.length);
  for (const v of s.meta.conf.voters) w.str(v);
  w.u32(s.meta.conf.learners.length);
  for (const l of s.meta.conf.learners) w.str(l);
  w.u64(s.data.length);
  w.bytes(s.data);
  w.u32(crc32c(w.buf, 0, 0, w.length));
  return w.view();
}

/** Decodes and verifies a snapshot file; throws DecodeError on any damage. */
export function decodeSnapshot(buf: Uint8Array): Snapshot {
  if (buf.length < 4) throw new DecodeError('snapshot file shorter than its checksum');
  const stored = readU32(buf, buf.length - 4);
  const computed = crc32c(buf, 0, 0, buf.length - 4);
  if (stored !== computed) throw new DecodeError(`snapshot checksum mismatch (stored ${stored}, computed ${computed})`);
  const r = new ByteReader(buf, 0, buf.length - 4);
  if (r.u32() !== SNAPSHOT_MAGIC) throw new DecodeError('bad snapshot magic');
  const version = r.u32();
  if (version !== SNAPSHOT_VERSION) throw new DecodeError(`unsupported snapshot version ${version}`);
  const index = LogIndex(r.u64());
  const term = Term(r.u64());
  const voters: NodeId[] = [];
  for (let n = r.u32(); n > 0; n--) voters.push(NodeId(r.str()));
  const learners: NodeId[] = [];
  for (let n = r.u32(); n > 0; n--) learners.push(NodeId(r.str()));
  const data = r.bytes(r.u64());
  r.done();
  assert(data.length >= 0, 'data decoded');
  return { meta: { index, term, conf: { voters, learners } }, data };
}
