/**
 * Goal: a Raft message survives the wire exactly: every field, absent
 * optional fields staying absent. Decoding a forged message never throws
 * (the core's message check refuses it), and a batch is refused at the
 * stream when it is for another cell or carries a non-member's message.
 * Method: encode to fencer.raft.v1 bytes and back, for a message with every
 * field set and for a minimal one; takeBatch over hand-made batches.
 */
import { describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { DropReason, EntryType, checkMessage, type Message } from '@fencer/raft';
import { raftpb } from '@fencer/protocol';
import { type StreamRefusal, admitsSender, messageFromWire, messageToWire, takeBatch } from '../src/index.js';

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

describe('forged messages on the wire', () => {
  const heartbeat = (from: string, term = 2): raftpb.RaftMessage =>
    messageToWire({ type: 'Heartbeat', from: NodeId(from), to: NodeId('b'), term: Term(term) });

  it('an entry of a type the log does not know decodes, and the message check refuses it (it used to end the process)', () => {
    const w: raftpb.RaftMessage = {
      ...messageToWire({ type: 'AppendEntries', from: NodeId('a'), to: NodeId('b'), term: Term(3), index: LogIndex(0), logTerm: Term(0) }),
      entries: [{ term: 3, index: 1, type: 9, data: new Uint8Array([1]) }],
    };
    const m = messageFromWire(w)!;
    expect(m.entries![0]!.type).toBe(9);
    expect(checkMessage(m, NodeId('b'))).toBe(DropReason.BadEntries);
  });

  function intake(admits?: (id: string) => boolean) {
    const got: Message[] = [];
    const refused: StreamRefusal[] = [];
    const options = {
      senderAddress: '',
      cellId: 'cell-1',
      onMessage: (m: Message) => got.push(m),
      onRefused: (r: StreamRefusal) => refused.push(r),
    };
    return { got, refused, options: admits ? { ...options, admits } : options };
  }
  const members = (id: string): boolean => id === 'a' || id === 'b';

  it("refuses another cell's batch whole, and counts it", () => {
    const { got, refused, options } = intake(members);
    expect(takeBatch({ senderAddress: '', cellId: 'cell-2', messages: [heartbeat('a')] }, options)).toMatch(
      /belongs to cell cell-1, not cell-2/,
    );
    expect(got).toEqual([]);
    expect(refused).toEqual(['other-cell']);
  });

  it("refuses a batch carrying a non-member's message whole, whatever its term, and counts it", () => {
    const { got, refused, options } = intake(members);
    const batch = { senderAddress: '', cellId: 'cell-1', messages: [heartbeat('a'), heartbeat('intruder', 2 ** 53 - 1)] };
    expect(takeBatch(batch, options)).toMatch(/"intruder", which is not a member of cell cell-1/);
    expect(got).toEqual([]);
    expect(refused).toEqual(['not-member']);
  });

  it("hands on a member's messages, skipping and counting a type it does not know", () => {
    const { got, refused, options } = intake(members);
    const unknown = { ...heartbeat('a'), type: 99 as raftpb.MessageType };
    expect(
      takeBatch({ senderAddress: '', cellId: 'cell-1', messages: [heartbeat('a', 4), unknown, heartbeat('b', 5)] }, options),
    ).toBeUndefined();
    expect(got.map((m) => [m.from, m.term])).toEqual([
      ['a', 4],
      ['b', 5],
    ]);
    expect(refused).toEqual(['unknown-type']);
  });

  it('a node that follows a leader takes its known members and that leader only; one that follows none takes anyone', () => {
    const isKnown = (id: string): boolean => id === 'a' || id === 'b';
    // Following a: a stranger is refused (the forgery the process-level test sends).
    expect(['a', 'b', 'intruder'].map((from) => admitsSender(from, { isKnown, leader: 'a' }))).toEqual([true, true, false]);
    // Following d, a member added while this node lagged: d is taken before the directory names it.
    expect(admitsSender('d', { isKnown, leader: 'd' })).toBe(true);
    // A wiped or restarted node, or one between leaders, must reach a leader it has not heard of.
    expect(admitsSender('d', { isKnown, leader: null })).toBe(true);
  });

  it("passes on the sender's peer address of a batch it takes from one sender, and of no other batch", () => {
    const learned: [string, string][] = [];
    const { options } = intake(members);
    const withAddress = { ...options, onSenderAddress: (from: string, address: string) => learned.push([from, address]) };
    const batch = (address: string, ...messages: raftpb.RaftMessage[]) => ({ cellId: 'cell-1', messages, senderAddress: address });
    expect(takeBatch(batch('127.0.0.1:7309', heartbeat('a'), heartbeat('a', 3)), withAddress)).toBeUndefined();
    // Refused (a stranger), from two senders, or naming no address: nothing learned.
    expect(takeBatch(batch('127.0.0.1:6666', heartbeat('intruder')), withAddress)).toBeDefined();
    expect(takeBatch(batch('127.0.0.1:7310', heartbeat('a'), heartbeat('b')), withAddress)).toBeUndefined();
    expect(takeBatch(batch('', heartbeat('b')), withAddress)).toBeUndefined();
    expect(learned).toEqual([['a', '127.0.0.1:7309']]);
  });

  it('without a membership check, takes any sender (a group with no directory)', () => {
    const { got, options } = intake();
    expect(takeBatch({ senderAddress: '', cellId: 'cell-1', messages: [heartbeat('anyone')] }, options)).toBeUndefined();
    expect(got.map((m) => m.from)).toEqual(['anyone']);
  });
});
