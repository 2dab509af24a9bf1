/**
 * A snapshot rewritten for a disaster restore
 * (docs/decisions/0014-snapshots-in-object-storage.md): a cell rebuilt
 * from an object-store snapshot cannot know what the lost cell granted
 * after it, so its revision base is raised above anything the lost cell
 * could have issued since (docs/decisions/0003-revisions-are-log-index-plus-base.md),
 * and its member directory names the new replicas instead of the lost ones.
 *
 * The snapshot is decoded (every invariant checked) and encoded again with
 * the new base and members, never edited in place, so the result is a
 * canonical snapshot that `LockStateMachine.restore` takes like any other.
 * Every revision inside it (tokens, lastRevision, openedRevision) stays as
 * it was: they are at most the old last revision, so below every revision
 * the restored cell will issue.
 */
import { ByteReader, DecodeError } from './codec.js';
import { LIMITS, MEMBERS_MAX, type FsmLimits } from './limits.js';
import { SNAPSHOT_VERSIONS_READ, decodeSnapshot, encodeSnapshot } from './state-codec.js';
import type { MemberAddress } from './types.js';
import { checkHostPort, checkMemberId } from './validate.js';

/** What a snapshot says of its revisions, read without decoding the lock table. */
export interface SnapshotHead {
  readonly formatVersion: number;
  /** Index of the last entry the snapshot covers. */
  readonly appliedIndex: number;
  readonly revisionBase: number;
  /** Revision of that last entry: appliedIndex + revisionBase. Every revision inside the snapshot is at most this. */
  readonly lastRevision: number;
}

export interface RestoreRewrite {
  /** Added to the revision base: at least 1. */
  readonly revisionRaise: number;
  /** The new cell's member directory: every replica's client and peer address, by node id. */
  readonly members: ReadonlyMap<string, MemberAddress>;
}

function invalid(message: string): never {
  throw new DecodeError(message);
}

/** The version byte and the two varuints every snapshot starts with. Throws DecodeError when they do not read. */
export function readSnapshotHead(bytes: Uint8Array): SnapshotHead {
  const r = new ByteReader(bytes);
  const formatVersion = r.u8();
  if (!SNAPSHOT_VERSIONS_READ.includes(formatVersion)) invalid(`unknown snapshot format version ${formatVersion}`);
  const appliedIndex = r.varuint();
  const revisionBase = r.varuint();
  const lastRevision = appliedIndex + revisionBase;
  if (!Number.isSafeInteger(lastRevision)) invalid('revision overflows');
  return { formatVersion, appliedIndex, revisionBase, lastRevision };
}

function checkMembers(members: ReadonlyMap<string, MemberAddress>): void {
  if (members.size === 0) invalid('a restored cell needs at least one member');
  if (members.size > MEMBERS_MAX) invalid(`a restored cell names ${members.size} members, more than ${MEMBERS_MAX}`);
  for (const [id, m] of members) {
    const bad = checkMemberId(id) ?? checkHostPort(m.address, 'address') ?? checkHostPort(m.peerAddress, 'peer address');
    if (bad !== undefined) invalid(`member ${id}: ${bad.message}`);
  }
}

/**
 * The snapshot `bytes` with its revision base raised by `rewrite.revisionRaise`
 * and its member directory replaced by `rewrite.members`. Throws DecodeError
 * when the snapshot does not decode, or the rewrite is out of range.
 */
export function rewriteSnapshotForRestore(bytes: Uint8Array, rewrite: RestoreRewrite, limits: FsmLimits = LIMITS): Uint8Array {
  const { revisionRaise } = rewrite;
  if (!Number.isSafeInteger(revisionRaise) || revisionRaise < 1)
    invalid(`the revision raise must be an integer >= 1, got ${revisionRaise}`);
  checkMembers(rewrite.members);
  const decoded = decodeSnapshot(bytes, limits);
  const revisionBase = decoded.revisionBase + revisionRaise;
  // The restored cell's revisions (index + base) must stay safe integers for as long as its log can grow.
  if (!Number.isSafeInteger(revisionBase * 2) || !Number.isSafeInteger(decoded.appliedIndex + revisionBase * 2)) {
    invalid(`a revision base of ${revisionBase} leaves no room below 2^53 for the restored cell's revisions`);
  }
  const members = new Map<string, MemberAddress>();
  for (const [id, m] of rewrite.members) members.set(id, { address: m.address, peerAddress: m.peerAddress });
  return encodeSnapshot(decoded.appliedIndex, revisionBase, decoded.namespaces, members, decoded.staged, decoded.fences);
}
