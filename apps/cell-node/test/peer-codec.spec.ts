/**
 * Goal: a Raft message survives the wire exactly: every field, absent
 * optional fields staying absent.
 * Method: encode to fencer.raft.v1 bytes and back, for a message with every
 * field set and for a minimal one.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { EntryType, type Message } from '@fencer/raft';
import { raftpb } from '@fencer/protocol';
import { messageFromWire, messageToWire } from '../src/peer-codec.js';

const roundTrip = (m: Message): Message | undefined =>
  messageFromWire(raftpb.RaftMessage.decode(raftpb.RaftMessage.encode(messageToWire(m)).finish()));

describe('peer codec', () => {
  it('keeps every field of a full message', () => {
    const m: Message = {
      type: 'InstallSnapshot',
      from: NodeId('a'),
      to: NodeId('b'),
      term: Term(7),
      index: LogIndex(41),
      logTerm: Term(6),
      entries: [
        { term: Term(6), index: LogIndex(42), type: EntryType.Normal, data: new Uint8Array([1, 2]) },
        { term: Term(7), index: LogIndex(43), type: EntryType.ConfChange, data: new Uint8Array([3]) },
      ],
      commit: LogIndex(40),
      reject: true,
      rejectHint: LogIndex(12),
      rejectTerm: Term(3),
      snapshotMeta: { index: LogIndex(30), term: Term(5), conf: { voters: [NodeId('a'), NodeId('b')], learners: [NodeId('c')] } },
      snapshotChunk: new Uint8Array([9, 9, 9]),
      snapshotOffset: 4096,
      snapshotDone: true,
      snapshotTotalBytes: 8192,
      context: 'a/17',
      transfer: true,
    };
    expect(roundTrip(m)).toEqual(m);
  });

  it('keeps absent fields absent', () => {
    const m: Message = { type: 'Heartbeat', from: NodeId('x'), to: NodeId('y'), term: Term(1) };
    const back = roundTrip(m)!;
    expect(back).toEqual(m);
    expect(Object.keys(back).sort()).toEqual(['from', 'term', 'to', 'type']);
  });

  it('ignores a message type it does not know (a newer peer)', () => {
    expect(
      messageFromWire({
        ...messageToWire({ type: 'Heartbeat', from: NodeId('x'), to: NodeId('y'), term: Term(1) }),
        type: 99 as raftpb.MessageType,
      }),
    ).toBeUndefined();
  });
});
