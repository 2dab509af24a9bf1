/**
 * Raft messages on the wire: the core's `Message` ↔ `fencer.raft.v1.RaftMessage`.
 * Absent optional fields stay absent, so a decoded message is field-for-field
 * the one that was encoded.
 *
 * Decoding checks nothing a peer could get wrong: a message from the network
 * is judged by the core's message check (libs/raft message-check.ts), which
 * drops it with a reason. An assertion here would let one forged frame end
 * the process.
 */
import { LogIndex, NodeId, Term } from '@fencer/base';
import { DropReason, type EntryType, MessageType, type Entry, type Message } from '@fencer/raft';
import { raftpb } from '@fencer/protocol';

const toWire: Record<MessageType, raftpb.MessageType> = {
  PreVote: raftpb.MessageType.MESSAGE_TYPE_PRE_VOTE,
  PreVoteResponse: raftpb.MessageType.MESSAGE_TYPE_PRE_VOTE_RESPONSE,
  RequestVote: raftpb.MessageType.MESSAGE_TYPE_REQUEST_VOTE,
  RequestVoteResponse: raftpb.MessageType.MESSAGE_TYPE_REQUEST_VOTE_RESPONSE,
  AppendEntries: raftpb.MessageType.MESSAGE_TYPE_APPEND_ENTRIES,
  AppendEntriesResponse: raftpb.MessageType.MESSAGE_TYPE_APPEND_ENTRIES_RESPONSE,
  Heartbeat: raftpb.MessageType.MESSAGE_TYPE_HEARTBEAT,
  HeartbeatResponse: raftpb.MessageType.MESSAGE_TYPE_HEARTBEAT_RESPONSE,
  InstallSnapshot: raftpb.MessageType.MESSAGE_TYPE_INSTALL_SNAPSHOT,
  InstallSnapshotResponse: raftpb.MessageType.MESSAGE_TYPE_INSTALL_SNAPSHOT_RESPONSE,
  TimeoutNow: raftpb.MessageType.MESSAGE_TYPE_TIMEOUT_NOW,
};
const fromWire = new Map<raftpb.MessageType, MessageType>(Object.entries(toWire).map(([k, v]) => [v, k as MessageType]));

function entryToWire(e: Entry): raftpb.Entry {
  return { term: e.term, index: e.index, type: e.type, data: e.data };
}

/** The type is passed on as sent: an unknown one is the message check's to refuse (bad-entries). */
function entryFromWire(e: raftpb.Entry): Entry {
  return { term: Term(e.term), index: LogIndex(e.index), type: e.type as EntryType, data: e.data };
}

export function messageToWire(m: Message): raftpb.RaftMessage {
  return {
    type: toWire[m.type],
    from: m.from,
    to: m.to,
    term: m.term,
    index: m.index,
    logTerm: m.logTerm,
    entries: m.entries ? m.entries.map(entryToWire) : [],
    commit: m.commit,
    reject: m.reject,
    rejectHint: m.rejectHint,
    rejectTerm: m.rejectTerm,
    snapshotMeta: m.snapshotMeta
      ? {
          index: m.snapshotMeta.index,
          term: m.snapshotMeta.term,
          conf: { voters: [...m.snapshotMeta.conf.voters], learners: [...m.snapshotMeta.conf.learners] },
        }
      : undefined,
    snapshotChunk: m.snapshotChunk,
    snapshotOffset: m.snapshotOffset,
    snapshotDone: m.snapshotDone,
    snapshotTotalBytes: m.snapshotTotalBytes,
    context: m.context,
    transfer: m.transfer,
  };
}

/** Decodes a peer message; returns undefined for a type this node does not know (a newer peer). */
export function messageFromWire(w: raftpb.RaftMessage): Message | undefined {
  const type = fromWire.get(w.type);
  if (type === undefined) return undefined;
  const m: { -readonly [K in keyof Message]: Message[K] } = { type, from: NodeId(w.from), to: NodeId(w.to), term: Term(w.term) };
  if (w.index !== undefined) m.index = LogIndex(w.index);
  if (w.logTerm !== undefined) m.logTerm = Term(w.logTerm);
  if (w.entries.length > 0) m.entries = w.entries.map(entryFromWire);
  if (w.commit !== undefined) m.commit = LogIndex(w.commit);
  if (w.reject !== undefined) m.reject = w.reject;
  if (w.rejectHint !== undefined) m.rejectHint = LogIndex(w.rejectHint);
  if (w.rejectTerm !== undefined) m.rejectTerm = Term(w.rejectTerm);
  if (w.snapshotMeta !== undefined) {
    const conf = w.snapshotMeta.conf ?? { voters: [], learners: [] };
    m.snapshotMeta = {
      index: LogIndex(w.snapshotMeta.index),
      term: Term(w.snapshotMeta.term),
      conf: { voters: conf.voters.map(NodeId), learners: conf.learners.map(NodeId) },
    };
  }
  if (w.snapshotChunk !== undefined) m.snapshotChunk = w.snapshotChunk;
  if (w.snapshotOffset !== undefined) m.snapshotOffset = w.snapshotOffset;
  if (w.snapshotDone !== undefined) m.snapshotDone = w.snapshotDone;
  if (w.snapshotTotalBytes !== undefined) m.snapshotTotalBytes = w.snapshotTotalBytes;
  if (w.context !== undefined) m.context = w.context;
  if (w.transfer !== undefined) m.transfer = w.transfer;
  return m;
}

/**
 * Why a peer's bytes were refused before the core saw them: the transport's
 * labels of fencer_raft_messages_refused_total, beside the core's
 * DropReason (whose `not-member` and `unknown-type` they share).
 */
export const StreamRefusal = {
  /** A length prefix over the frame limit: the stream cannot be read further. */
  FrameTooLarge: 'frame-too-large',
  /** A frame that is not a RaftBatch. */
  Undecodable: 'undecodable',
  /** A batch for another cell (a replica of another cell, or a port reused by one). */
  OtherCell: 'other-cell',
  /** A message from a node this one does not know as a member. */
  NotMember: DropReason.NotMember,
  /** A message type this node does not know (a newer peer): skipped, the stream stays open. */
  UnknownType: DropReason.UnknownType,
} as const;
export type StreamRefusal = (typeof StreamRefusal)[keyof typeof StreamRefusal];

/** What the receiving half of a peer transport hands batches to. */
export interface PeerIntake {
  readonly cellId: string;
  /**
   * Whether this node takes messages from `id` (see admitsSender). A batch
   * carrying a message from anyone else is refused at the stream: without
   * this, a well-formed message from any host that can reach the peer port
   * would move the term (the core takes requests from non-members,
   * dissertation §4.1). Absent: every sender is taken.
   */
  readonly admits?: (id: string) => boolean;
  readonly onMessage: (m: Message) => void;
  /** Counts a refusal (fencer_raft_messages_refused_total{reason}). */
  readonly onRefused?: (reason: StreamRefusal) => void;
  /**
   * A taken batch named its sender's address (RaftBatch.sender_address), all
   * its messages from that one sender: the node may learn it for a sender it
   * has no link to (a member whose addition it missed).
   */
  readonly onSenderAddress?: (from: string, address: string) => void;
}

/**
 * Which senders a cell node takes messages from: the members it knows (its
 * configured peers, the replicated member directory, the applied
 * configuration) and the leader it follows. While it follows no leader (a
 * wiped disk, a restart, an election under way) it takes anyone: a replica
 * that missed a member's addition must still hear from that member once it
 * leads (§4.1), or it would never catch up. A learner, which never
 * campaigns, stops following a leader it has not heard from for an election
 * timeout all the same (the Raft core's rule for a node that cannot
 * campaign), so it too takes whoever leads next. So a replica that follows a
 * leader refuses strangers; a forgery that reaches a replica between
 * leaders is authentication's to stop (mTLS).
 */
export function admitsSender(from: string, view: { isKnown(id: string): boolean; readonly leader: string | null }): boolean {
  return view.leader === null || view.leader === from || view.isKnown(from);
}

/**
 * Hands on the messages of one batch from a peer. Returns why the stream
 * must be closed instead (a batch for another cell, or one carrying a
 * message from a non-member: then none of its messages is handed on), or
 * undefined when it was taken.
 */
export function takeBatch(batch: raftpb.RaftBatch, intake: PeerIntake): string | undefined {
  if (batch.cellId !== intake.cellId) {
    intake.onRefused?.(StreamRefusal.OtherCell);
    return `this node belongs to cell ${intake.cellId}, not ${batch.cellId.slice(0, 64)}`;
  }
  if (intake.admits) {
    for (const w of batch.messages) {
      if (!intake.admits(w.from)) {
        intake.onRefused?.(StreamRefusal.NotMember);
        return `a message from ${JSON.stringify(w.from.slice(0, 64))}, which is not a member of cell ${intake.cellId}`;
      }
    }
  }
  const from = batch.messages[0]?.from;
  if (intake.onSenderAddress && batch.senderAddress !== '' && from !== undefined && batch.messages.every((w) => w.from === from))
    intake.onSenderAddress(from, batch.senderAddress);
  for (const w of batch.messages) {
    const m = messageFromWire(w);
    if (m) intake.onMessage(m);
    else intake.onRefused?.(StreamRefusal.UnknownType);
  }
  return undefined;
}
