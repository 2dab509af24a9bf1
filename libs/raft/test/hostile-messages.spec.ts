/**
 * Goal: nothing a peer can send crashes or steers a node unless it is a
 * well-formed message a real peer could send
 * (docs/decisions/0013-peer-listener-and-hostile-input.md).
 * Malformed or misaddressed messages are dropped with their reason and
 * change nothing: no term, no output, no log. Requests from nodes outside
 * the configuration are still served, as the dissertation (§4.1) requires,
 * so joining nodes and not-yet-known leaders keep working.
 * Method: one hand-driven node per case, a message with exactly one defect,
 * and checks of step()'s answer, the term and the node's output; then a
 * fast-check property that throws defective messages at a seeded
 * three-node cluster between its steps and checks that each is dropped,
 * leaves its target's term and output alone, and that the cluster's safety
 * checkers hold and it converges afterwards.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { LogIndex, NodeId, Term } from '@fencer/base';
import {
  ConfChangeType,
  DropReason,
  EntryType,
  MessageType,
  encodeConfChange,
  raftLimits,
  type Entry,
  type Message,
  type RaftNode,
} from '../src/index.js';
import { drain, electLeader, ent, msg, newNode, ofType, storedTerms, type Handle } from './helpers.js';
import { bytes, Network } from './network.js';

const three = ['1', '2', '3'];

/** A follower of leader 1 in term 2, log [1, 2] committed to 1. */
function follower(): Handle {
  const h = newNode({ id: '2', voters: three, logTerms: [1, 2], term: 2, commit: 1 });
  h.node.step(msg(MessageType.Heartbeat, '1', '2', 2, { commit: LogIndex(1) }));
  drain(h);
  return h;
}

/** Steps `m` into the node and returns the reason with what it changed. */
function stepAndSee(h: Handle, m: unknown): { reason: string | null; termBefore: number; termAfter: number; output: boolean } {
  const termBefore = h.node.status().term;
  const reason = h.node.step(m as Message);
  return { reason, termBefore, termAfter: h.node.status().term, output: h.node.hasReady() };
}

function expectDropped(h: Handle, m: unknown, reason: DropReason): void {
  const before = JSON.stringify(h.node.status());
  const seen = stepAndSee(h, m);
  expect(seen.reason).toBe(reason);
  expect(seen.termAfter).toBe(seen.termBefore);
  expect(seen.output).toBe(false);
  expect(JSON.stringify(h.node.status())).toBe(before);
}

const append = (fields: Partial<Message> = {}): Message =>
  ({
    ...msg(MessageType.AppendEntries, '1', '2', 2, {
      index: LogIndex(2),
      logTerm: Term(2),
      entries: [ent(3, 2, 'x')],
      commit: LogIndex(1),
    }),
    ...fields,
  }) as Message;

describe('Messages from the network are checked, never asserted on', () => {
  it('a message for another node is dropped as wrong-to (it used to trip an assertion and stop the process)', () => {
    expectDropped(follower(), append({ to: NodeId('9') }), DropReason.WrongTo);
  });

  it('a message that claims to come from this node is dropped as from-self', () => {
    expectDropped(follower(), append({ from: NodeId('2') }), DropReason.FromSelf);
  });

  it.each([
    ['null', null],
    ['a string', 'AppendEntries'],
    ['a number as sender', { ...append(), from: 7 }],
    ['an empty receiver', { ...append(), to: '' }],
    ['a flag that is not a boolean', { ...msg(MessageType.RequestVoteResponse, '1', '2', 2), reject: 'no' }],
    ['a context that is not a string', { ...msg(MessageType.HeartbeatResponse, '1', '2', 2), context: 5 }],
  ])('a malformed message (%s) is dropped as malformed', (_what, m) => {
    expectDropped(follower(), m, DropReason.Malformed);
  });

  it('a message of a type nobody sends is dropped as unknown-type', () => {
    expectDropped(follower(), { ...append(), type: 'Bogus' }, DropReason.UnknownType);
  });

  it.each([
    ['negative', -1],
    ['fractional', 2.5],
    ['NaN', Number.NaN],
    ['near 2^53', 2 ** 53 - 1],
    ['one past termMax', raftLimits.termMax + 1],
    ['a string', '3'],
  ])('a message term that is %s is dropped as bad-term, and the term does not move', (_what, term) => {
    expectDropped(follower(), { ...append(), term }, DropReason.BadTerm);
  });

  it('a log term or reject term above the message term is dropped as bad-term (no sender has an entry from its future)', () => {
    expectDropped(follower(), append({ logTerm: Term(3), entries: [] }), DropReason.BadTerm);
    expectDropped(follower(), { ...msg(MessageType.AppendEntriesResponse, '1', '2', 2), reject: true, rejectTerm: 5 }, DropReason.BadTerm);
  });

  it.each([
    ['a negative index', { index: -1 }],
    ['a fractional index', { index: 1.5 }],
    ['an index past indexMax', { index: raftLimits.indexMax + 1 }],
    ['a negative commit', { commit: -3 }],
    ['an infinite hint', { rejectHint: Number.POSITIVE_INFINITY }],
    ['a negative snapshot offset', { snapshotOffset: -1 }],
  ])('%s is dropped as bad-index', (_what, fields) => {
    expectDropped(follower(), { ...append(), entries: [], ...fields }, DropReason.BadIndex);
  });

  it.each<[string, readonly unknown[]]>([
    ['an entry that does not follow index', [ent(4, 2, 'x')]],
    ['a gap between entries', [ent(3, 2), ent(5, 2)]],
    ['terms that go down', [ent(3, 2), { ...ent(4, 2), term: 1 }]],
    ['an entry term above the message term', [ent(3, 3)]],
    ['an entry term below the log term before it', [ent(3, 1)]],
    ['an entry type nobody writes', [{ ...ent(3, 2), type: 9 }]],
    ['entry data that is not bytes', [{ ...ent(3, 2), data: 'x' }]],
    ['a membership change that does not decode', [{ ...ent(3, 2), type: EntryType.ConfChange, data: new Uint8Array([1, 9, 65]) }]],
    ['an entry that is not an object', [null]],
  ])('entries with %s are dropped as bad-entries, and the log is untouched', (_what, entries) => {
    const h = follower();
    expectDropped(h, append({ entries: entries as Entry[] }), DropReason.BadEntries);
    expect(storedTerms(h.storage)).toEqual([1, 2]);
  });

  it('too many entries in one message are dropped as bad-entries', () => {
    const entries = Array.from({ length: raftLimits.entriesPerMsgMax + 1 }, (_, i) => ent(3 + i, 2));
    expectDropped(follower(), append({ entries }), DropReason.BadEntries);
  });

  it('an InstallSnapshot without metadata, or with a configuration no cell can have, is dropped as bad-snapshot', () => {
    const chunk = { snapshotChunk: new Uint8Array(4), snapshotOffset: 0, snapshotTotalBytes: 4, snapshotDone: true };
    expectDropped(follower(), msg(MessageType.InstallSnapshot, '1', '2', 2, chunk), DropReason.BadSnapshot);
    const both = { index: LogIndex(5), term: Term(2), conf: { voters: [NodeId('1')], learners: [NodeId('1')] } };
    expectDropped(follower(), msg(MessageType.InstallSnapshot, '1', '2', 2, { ...chunk, snapshotMeta: both }), DropReason.BadSnapshot);
    const noVoters = { index: LogIndex(5), term: Term(2), conf: { voters: [], learners: [] } };
    expectDropped(follower(), msg(MessageType.InstallSnapshot, '1', '2', 2, { ...chunk, snapshotMeta: noVoters }), DropReason.BadSnapshot);
  });

  it('a response from a node outside the configuration is dropped as not-member: it answers nothing this node asked', () => {
    const h = newNode({ id: '1', voters: three, term: 1 });
    electLeader(h, three);
    expectDropped(h, msg(MessageType.AppendEntriesResponse, '9', '1', 2, { index: LogIndex(1) }), DropReason.NotMember);
    // Not even a higher term from outside moves the leader.
    expectDropped(h, msg(MessageType.HeartbeatResponse, '9', '1', 50), DropReason.NotMember);
  });

  it("a learner's responses count: learners are members", () => {
    const h = newNode({ id: '1', voters: three, learners: ['4'], term: 1 });
    electLeader(h, three);
    expect(h.node.step(msg(MessageType.AppendEntriesResponse, '4', '1', 2, { index: LogIndex(1) }))).toBeNull();
  });

  it('§5.2 "at most one leader can be elected in a given term": an append in our term from another node than its leader is dropped as not-leader', () => {
    const h = follower();
    expectDropped(h, append({ from: NodeId('3') }), DropReason.NotLeader);
    expectDropped(h, msg(MessageType.Heartbeat, '3', '2', 2, { commit: LogIndex(2) }), DropReason.NotLeader);
    expect(h.node.status().leader).toBe('1');
  });

  it("TimeoutNow from another node than this term's leader, or for another term, is dropped as not-leader: it would start an election past every lease", () => {
    expectDropped(follower(), msg(MessageType.TimeoutNow, '3', '2', 2), DropReason.NotLeader);
    expectDropped(follower(), msg(MessageType.TimeoutNow, '1', '2', 3), DropReason.NotLeader);
    const h = follower();
    expect(h.node.step(msg(MessageType.TimeoutNow, '1', '2', 2))).toBeNull();
    expect(h.node.status().role).toBe('candidate');
    // Restarted in the leader's term, not knowing the leader yet: the transfer still goes through.
    const restarted = newNode({ id: '2', voters: three, logTerms: [1, 2], term: 2, commit: 1 });
    expect(restarted.node.step(msg(MessageType.TimeoutNow, '1', '2', 2))).toBeNull();
    expect(restarted.node.status().role).toBe('candidate');
  });
});

describe('§4.1 "servers process incoming RPC requests without consulting their current configurations"', () => {
  it("a joining node with no configuration takes the leader's appends (and so learns the configuration)", () => {
    const h = newNode({ id: '4', voters: [] });
    const conf = (index: number, node: string): Entry => ({
      index: LogIndex(index),
      term: Term(1),
      type: EntryType.ConfChange,
      data: encodeConfChange({ type: ConfChangeType.AddVoter, node: NodeId(node) }),
    });
    const entries = [conf(1, '1'), conf(2, '2'), conf(3, '3')];
    expect(
      h.node.step(msg(MessageType.AppendEntries, '1', '4', 2, { index: LogIndex(0), logTerm: Term(0), entries, commit: LogIndex(3) })),
    ).toBeNull();
    const out = drain(h);
    expect(ofType(out.messages, MessageType.AppendEntriesResponse)[0]?.index).toBe(3);
    expect(h.node.status().voters).toEqual(['1', '2', '3']);
  });

  it('a vote request from a node this node does not know yet is answered', () => {
    const h = newNode({ id: '2', voters: three, logTerms: [1], term: 1 });
    expect(h.node.step(msg(MessageType.RequestVote, '4', '2', 2, { index: LogIndex(1), logTerm: Term(1) }))).toBeNull();
    expect(ofType(drain(h).messages, MessageType.RequestVoteResponse).map((m) => [m.to, m.reject])).toEqual([['4', false]]);
  });

  it('a heartbeat whose commit passes our log (a wiped disk, or a forgery) commits nothing and still gets its answer', () => {
    const h = follower();
    expect(h.node.step(msg(MessageType.Heartbeat, '1', '2', 2, { commit: LogIndex(40) }))).toBeNull();
    expect(h.node.status().commit).toBe(1);
    expect(ofType(drain(h).messages, MessageType.HeartbeatResponse)).toHaveLength(1);
  });

  it('an answer to a read round whose heartbeat has not gone out is ignored: no follower can have seen it', () => {
    const h = newNode({ id: '1', voters: three, term: 1 });
    electLeader(h, three);
    h.node.step(msg(MessageType.AppendEntriesResponse, '2', '1', 2, { index: LogIndex(1) }));
    drain(h);
    expect(h.node.readIndex('r')).toBe(true);
    // The round's id is guessable (1); its heartbeat leaves only with the next ready.
    h.node.step(msg(MessageType.HeartbeatResponse, '2', '1', 2, { context: '1' }));
    const out = drain(h);
    expect(out.readStates).toEqual([]);
    const beat = ofType(out.messages, MessageType.Heartbeat).find((m) => m.context !== undefined);
    h.node.step(msg(MessageType.HeartbeatResponse, '2', '1', 2, { context: beat?.context as string }));
    expect(drain(h).readStates.map((r) => r.requestCtx)).toEqual(['r']);
  });

  it("what the checks cannot catch: a well-formed AppendEntries from a real member with a higher term is obeyed (authentication is the transport's job)", () => {
    const h = follower();
    expect(
      h.node.step(
        msg(MessageType.AppendEntries, '3', '2', 9, {
          index: LogIndex(2),
          logTerm: Term(2),
          entries: [ent(3, 9, 'forged')],
          commit: LogIndex(3),
        }),
      ),
    ).toBeNull();
    drain(h);
    expect([h.node.status().term, h.node.status().leader, h.node.status().commit, storedTerms(h.storage)]).toEqual([9, '3', 3, [1, 2, 9]]);
  });
});

// ---------------------------------------------------------------- property

/** One defect each; every one of them must get the message dropped whatever else it holds. */
const defects = [
  'wrong-to',
  'from-self',
  'garbage',
  'unknown-type',
  'term-negative',
  'term-huge',
  'term-fraction',
  'log-term-ahead',
  'index-negative',
  'entries-gap',
  'entry-term-ahead',
  'entry-bad-conf',
  'snapshot-no-meta',
  'response-from-stranger',
  'append-from-non-leader',
  'timeout-now-from-non-leader',
] as const;
type Defect = (typeof defects)[number];

interface Injection {
  readonly target: number;
  readonly defect: Defect;
  readonly type: MessageType;
  readonly garbage: unknown;
}

const injection: fc.Arbitrary<Injection> = fc.record({
  target: fc.nat(2),
  defect: fc.constantFrom(...defects),
  type: fc.constantFrom(...Object.values(MessageType)),
  garbage: fc.oneof(fc.anything(), fc.record({ type: fc.string(), from: fc.anything(), to: fc.anything(), term: fc.anything() })),
});

/** A message to `to`, as a real member might send it now, then broken by `defect`. */
function defective(inj: Injection, to: string, node: RaftNode, ids: readonly string[]): unknown {
  const st = node.status();
  const other = ids.find((id) => id !== to && id !== st.leader) ?? (ids.find((id) => id !== to) as string);
  const base = msg(inj.type, st.leader !== null && st.leader !== to ? st.leader : other, to, st.term, {
    index: LogIndex(st.lastIndex),
    logTerm: Term(Math.min(st.term, 1)),
    commit: LogIndex(0),
    entries: [],
  });
  switch (inj.defect) {
    case 'wrong-to':
      return { ...base, to: 'zz' };
    case 'from-self':
      return { ...base, from: to };
    case 'garbage':
      // fc.anything() may build an object; whatever it is, it names no node of this cluster as sender and receiver.
      return inj.garbage;
    case 'unknown-type':
      return { ...base, type: `${inj.type}!` };
    case 'term-negative':
      return { ...base, term: -1 - st.term };
    case 'term-huge':
      return { ...base, term: 2 ** 53 - 1 };
    case 'term-fraction':
      return { ...base, term: st.term + 0.5 };
    case 'log-term-ahead':
      return { ...base, logTerm: st.term + 1 };
    case 'index-negative':
      return { ...base, index: -5 };
    case 'entries-gap':
      return { ...base, entries: [ent(st.lastIndex + 2, st.term, 'gap')] };
    case 'entry-term-ahead':
      return { ...base, entries: [ent(st.lastIndex + 1, st.term + 1, 'future')] };
    case 'entry-bad-conf':
      return { ...base, entries: [{ ...ent(st.lastIndex + 1, st.term), type: EntryType.ConfChange, data: bytes('junk') }] };
    case 'snapshot-no-meta':
      return { ...base, type: MessageType.InstallSnapshot, snapshotChunk: new Uint8Array(1), snapshotOffset: 0, snapshotTotalBytes: 1 };
    case 'response-from-stranger':
      return { ...base, type: MessageType.AppendEntriesResponse, from: 'stranger', term: st.term + 5 };
    case 'append-from-non-leader':
      // In the term of a known leader, from a member that is not it (or from anyone when we lead).
      return st.leader === null
        ? { ...base, to: 'zz' }
        : { ...base, type: MessageType.Heartbeat, from: ids.find((id) => id !== to && id !== st.leader) ?? 'zz' };
    case 'timeout-now-from-non-leader':
      return { ...base, type: MessageType.TimeoutNow, from: ids.find((id) => id !== to && id !== st.leader) ?? 'zz' };
  }
}

describe('property: defective messages among a live cluster', () => {
  it('are each dropped, move no term, produce no output, and the cluster stays safe and converges', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.array(fc.tuple(fc.nat(4), injection), { minLength: 1, maxLength: 25 }),
        (seed, plan) => {
          const ids = ['a', 'b', 'c'];
          const net = new Network({ ids, seed });
          net.waitLeader(200);
          let cmd = 0;
          for (const [ticks, inj] of plan) {
            net.leader()?.node.propose(bytes(`c${cmd++}`));
            net.tick(ticks);
            net.stabilize();
            const to = ids[inj.target] as string;
            const target = net.get(to).node;
            const m = defective(inj, to, target, ids);
            const term = target.status().term;
            const reason = target.step(m as Message);
            expect(
              reason,
              JSON.stringify({ defect: inj.defect, m }, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
            ).not.toBeNull();
            expect(target.status().term).toBe(term);
            expect(target.hasReady()).toBe(false);
          }
          net.one('final', ids.length, 400);
          net.checkLogMatching();
          const applied = JSON.stringify(net.get('a').machine.commands);
          for (const id of ids) expect(JSON.stringify(net.get(id).machine.commands)).toBe(applied);
        },
      ),
      { numRuns: 40, seed: 20261201 },
    );
  });
});
