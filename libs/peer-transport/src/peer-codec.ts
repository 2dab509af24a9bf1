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
import { type EntryType, MessageType, type Entry, type Message } from '@fencer/raft';
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
