/**
 * The intake check: what a peer port does with a batch before the Raft core
 * sees any of it. A batch for another cell, or one carrying a message from a
 * sender this node does not take, closes the stream that carried it and is
 * counted by reason; the messages of a batch it takes are decoded and handed
 * on one by one. The same check serves the TCP frames, the gRPC stream, and
 * the control plane's meta group.
 */
import { DropReason, type Message } from '@fencer/raft';
import type { raftpb } from '@fencer/protocol';
import { messageFromWire } from './peer-codec.js';

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
  /** A connection whose TLS handshake failed: plaintext, a certificate the CA did not sign, or an expired one. */
  TlsHandshake: 'tls-handshake',
  /** A verified certificate that names no replica of this cell (another cell's replica, a router, ...). */
  ForeignCertificate: 'foreign-certificate',
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
