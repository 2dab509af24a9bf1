/**
 * The shape a peer's message must have before the core looks at it. A
 * message comes from the network, so nothing in it is trusted: a malformed
 * or misaddressed one is dropped with a reason the caller counts, and never
 * reaches an assertion (docs/decisions/0013-peer-listener-and-hostile-input.md). Assertions in the core
 * stay for its own invariants.
 *
 * These checks need no state. The ones that need the node's state (who is a
 * member, who leads this term) live in Raft.step, which also returns a
 * DropReason.
 *
 * What passes here is well-formed, not authentic: a forged message that is
 * well-formed and names a real member still acts (a higher-term
 * AppendEntries is obeyed, as the paper requires). Authenticating peers is
 * the transport's job.
 */
import type { NodeId } from '@fencer/base';
import { MessageType, type Message } from './api.js';
import { isConfChangeData } from './conf-change.js';
import { entriesPerMsgMax, indexMax, termMax } from './limits.js';
import { EntryType } from './types.js';

/** Why a message from the network was dropped; a metric label, so the set is fixed. */
export const DropReason = {
  /** Not an object, or a field of the wrong kind (from/to not a node id, a flag not a boolean, ...). */
  Malformed: 'malformed',
  UnknownType: 'unknown-type',
  /** Addressed to another node. */
  WrongTo: 'wrong-to',
  /** Claims to come from this node. */
  FromSelf: 'from-self',
  /** A term (message, log or reject term) that is not an integer in [0, termMax], or above the message's own term. */
  BadTerm: 'bad-term',
  /** An index, commit index, hint or offset that is not an integer in [0, indexMax]. */
  BadIndex: 'bad-index',
  /** Entries that are not contiguous after `index`, of an unknown type, with terms out of order, or too many. */
  BadEntries: 'bad-entries',
  /** InstallSnapshot without metadata, or with metadata or a chunk of the wrong shape. */
  BadSnapshot: 'bad-snapshot',
  /**
   * A response from a node outside the configuration: it answers nothing this
   * node asked. A node's transport uses the same reason for any message from
   * a sender that it does not know as a member, refused at the stream.
   */
  NotMember: 'not-member',
  /** A leader's message (or TimeoutNow) in this node's term from another node than the leader it knows for that term; TimeoutNow for another term. */
  NotLeader: 'not-leader',
} as const;
export type DropReason = (typeof DropReason)[keyof typeof DropReason];

const messageTypes: ReadonlySet<string> = new Set(Object.values(MessageType));

/** Why `m` cannot be handled by node `self`, or null when it is well-formed and addressed to it. */
export function checkMessage(m: unknown, self: NodeId): DropReason | null {
  if (typeof m !== 'object' || m === null) return DropReason.Malformed;
  const msg = m as Message;
  if (!isNodeId(msg.from) || !isNodeId(msg.to)) return DropReason.Malformed;
  if (typeof msg.type !== 'string' || !messageTypes.has(msg.type)) return DropReason.UnknownType;
  if (msg.to !== self) return DropReason.WrongTo;
  if (msg.from === self) return DropReason.FromSelf;
  return checkFields(msg) ?? checkEntries(msg) ?? checkSnapshot(msg);
}

function checkFields(m: Message): DropReason | null {
  if (!isTerm(m.term)) return DropReason.BadTerm;
  // A sender's log and its hints never name a term above its own.
  if (!optional(m.logTerm, isTerm) || (m.logTerm ?? 0) > m.term) return DropReason.BadTerm;
  if (!optional(m.rejectTerm, isTerm) || (m.rejectTerm ?? 0) > m.term) return DropReason.BadTerm;
  if (!optional(m.index, isIndex) || !optional(m.commit, isIndex) || !optional(m.rejectHint, isIndex)) return DropReason.BadIndex;
  if (!optional(m.snapshotOffset, isIndex) || !optional(m.snapshotTotalBytes, isIndex)) return DropReason.BadIndex;
  if (!optional(m.reject, isBoolean) || !optional(m.snapshotDone, isBoolean) || !optional(m.transfer, isBoolean))
    return DropReason.Malformed;
  if (!optional(m.context, (c) => typeof c === 'string')) return DropReason.Malformed;
  return null;
}

/** Entries must continue the log right after `index`, in term order, and be of a kind the log knows. */
function checkEntries(m: Message): DropReason | null {
  if (m.entries === undefined) return null;
  if (!Array.isArray(m.entries) || m.entries.length > entriesPerMsgMax) return DropReason.BadEntries;
  if (m.entries.length > 0 && m.index === undefined) return DropReason.BadEntries;
  let prevTerm = m.logTerm ?? 0;
  for (let i = 0; i < m.entries.length; i++) {
    const e: unknown = m.entries[i];
    if (typeof e !== 'object' || e === null) return DropReason.BadEntries;
    const { index, term, type, data } = e as Record<string, unknown>;
    if (index !== (m.index ?? 0) + 1 + i) return DropReason.BadEntries;
    if (!isTerm(term) || term < Math.max(1, prevTerm) || term > m.term) return DropReason.BadEntries;
    if (!(data instanceof Uint8Array)) return DropReason.BadEntries;
    if (type !== EntryType.Normal && type !== EntryType.ConfChange) return DropReason.BadEntries;
    if (type === EntryType.ConfChange && !isConfChangeData(data)) return DropReason.BadEntries;
    prevTerm = term;
  }
  return null;
}

function checkSnapshot(m: Message): DropReason | null {
  const meta = m.snapshotMeta;
  if (meta === undefined) return m.type === MessageType.InstallSnapshot ? DropReason.BadSnapshot : null;
  if (typeof meta !== 'object' || meta === null) return DropReason.BadSnapshot;
  if (!isIndex(meta.index) || meta.index < 1 || !isTerm(meta.term) || meta.term < 1 || meta.term > m.term) return DropReason.BadSnapshot;
  if (!isConfState(meta.conf)) return DropReason.BadSnapshot;
  if (m.type === MessageType.InstallSnapshot) {
    // A size above snapshotBytesMax is well-formed: the receiver answers it with a rejection.
    if (!(m.snapshotChunk instanceof Uint8Array) || m.snapshotTotalBytes === undefined || m.snapshotOffset === undefined)
      return DropReason.BadSnapshot;
  }
  return null;
}

/** Voters and learners: distinct node ids, none both, at least one voter. */
function isConfState(conf: unknown): boolean {
  if (typeof conf !== 'object' || conf === null) return false;
  const { voters, learners } = conf as Record<string, unknown>;
  if (!Array.isArray(voters) || !Array.isArray(learners) || voters.length === 0) return false;
  const all: unknown[] = [...voters, ...learners];
  return all.every(isNodeId) && new Set(all).size === all.length;
}

function isNodeId(v: unknown): v is NodeId {
  return typeof v === 'string' && v.length > 0;
}

function isTerm(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= termMax;
}

function isIndex(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= indexMax;
}

function isBoolean(v: unknown): boolean {
  return typeof v === 'boolean';
}

function optional<T>(v: T | undefined, check: (v: T) => boolean): boolean {
  return v === undefined || check(v);
}
