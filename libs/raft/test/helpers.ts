/**
 * Helpers for tests that drive one node by hand (etcd's paper-test style):
 * build a node over a MemoryStorage holding a given log and hard state,
 * feed it messages, and collect what its Readies contain. Each Ready is
 * persisted into the storage before advance(), as a real caller would.
 */
import { LogIndex, NodeId, SeededRandom, Term } from '@fencer/base';
import {
  EntryType,
  MemoryStorage,
  MessageType,
  createRaftNode,
  defaultRaftConfig,
  type Entry,
  type HardState,
  type Message,
  type RaftBug,
  type RaftConfig,
  type RaftNode,
  type ReadState,
  type SoftState,
} from '../src/index.js';

export const N = NodeId;

export interface NodeSpec {
  id: string;
  voters: readonly string[];
  learners?: readonly string[];
  /** Terms of the entries at index 1, 2, ... */
  logTerms?: readonly number[];
  term?: number;
  vote?: string | null;
  commit?: number;
  seed?: number;
  preVote?: boolean;
  checkQuorum?: boolean;
  broadcastCommit?: boolean;
  electionTicks?: number;
  heartbeatTicks?: number;
  idleHeartbeatTicks?: number;
  maxEntriesPerMsg?: number;
  maxBytesPerMsg?: number;
  maxInflightMsgs?: number;
  snapshotChunkBytes?: number;
  bugs?: Partial<Record<RaftBug, boolean>>;
  storage?: MemoryStorage;
}

export interface Handle {
  node: RaftNode;
  storage: MemoryStorage;
  config: RaftConfig;
}

export function ent(index: number, term: number, data = ''): Entry {
  return { index: LogIndex(index), term: Term(term), type: EntryType.Normal, data: new TextEncoder().encode(data) };
}

export function storageWith(spec: Pick<NodeSpec, 'voters' | 'learners' | 'logTerms' | 'term' | 'vote' | 'commit'>): MemoryStorage {
  const s = new MemoryStorage({ conf: { voters: spec.voters.map(N), learners: (spec.learners ?? []).map(N) } });
  const terms = spec.logTerms ?? [];
  s.append(terms.map((t, i) => ent(i + 1, t)));
  const term = spec.term ?? (terms.length > 0 ? (terms[terms.length - 1] as number) : 0);
  const hs: HardState = { term: Term(term), vote: spec.vote == null ? null : N(spec.vote), commit: LogIndex(spec.commit ?? 0) };
  s.setHardState(hs);
  return s;
}

/** A node in the state the spec describes. Paper tests default to plain Raft (no pre-vote, no check-quorum). */
export function newNode(spec: NodeSpec): Handle {
  const storage = spec.storage ?? storageWith(spec);
  const config = defaultRaftConfig({
    id: N(spec.id),
    storage,
    random: new SeededRandom(spec.seed ?? 1),
    preVote: spec.preVote ?? false,
    checkQuorum: spec.checkQuorum ?? false,
    electionTicks: spec.electionTicks ?? 10,
    heartbeatTicks: spec.heartbeatTicks ?? 1,
    ...(spec.idleHeartbeatTicks !== undefined ? { idleHeartbeatTicks: spec.idleHeartbeatTicks } : {}),
    ...(spec.broadcastCommit !== undefined ? { broadcastCommit: spec.broadcastCommit } : {}),
    ...(spec.maxEntriesPerMsg !== undefined ? { maxEntriesPerMsg: spec.maxEntriesPerMsg } : {}),
    ...(spec.maxBytesPerMsg !== undefined ? { maxBytesPerMsg: spec.maxBytesPerMsg } : {}),
    ...(spec.maxInflightMsgs !== undefined ? { maxInflightMsgs: spec.maxInflightMsgs } : {}),
    ...(spec.snapshotChunkBytes !== undefined ? { snapshotChunkBytes: spec.snapshotChunkBytes } : {}),
    ...(spec.bugs !== undefined ? { bugs: spec.bugs } : {}),
  });
  return { node: createRaftNode(config), storage, config };
}

export interface Drained {
  messages: Message[];
  committed: Entry[];
  entries: Entry[];
  readStates: ReadState[];
  hardStates: HardState[];
  softState: SoftState | undefined;
}

/** Handles every Ready the node has (persist → collect messages → apply → advance) and returns what they held. */
export function drain(h: Handle): Drained {
  const out: Drained = { messages: [], committed: [], entries: [], readStates: [], hardStates: [], softState: undefined };
  for (let guard = 0; h.node.hasReady(); guard++) {
    if (guard > 100) throw new Error('node never runs out of Readies');
    const rd = h.node.ready();
    if (rd.snapshot !== undefined) h.storage.applySnapshot(rd.snapshot);
    if (rd.entries.length > 0) h.storage.append(rd.entries);
    if (rd.hardState !== undefined) {
      h.storage.setHardState(rd.hardState);
      out.hardStates.push(rd.hardState);
    }
    if (rd.softState !== undefined) out.softState = rd.softState;
    out.messages.push(...rd.messages);
    out.committed.push(...rd.committedEntries);
    out.entries.push(...rd.entries);
    out.readStates.push(...rd.readStates);
    h.node.advance();
  }
  return out;
}

export function msg(
  type: MessageType,
  from: string,
  to: string,
  term: number,
  fields: Partial<Omit<Message, 'type' | 'from' | 'to' | 'term'>> = {},
): Message {
  return { type, from: N(from), to: N(to), term: Term(term), ...fields };
}

/** Makes a node leader by campaigning and granting it every vote; returns after its Readies are drained. */
export function electLeader(h: Handle, voters: readonly string[]): Drained {
  h.node.campaign();
  const first = drain(h);
  if (h.node.status().role === 'pre-candidate') {
    const preTerm = h.node.status().term + 1;
    for (const v of voters) {
      if (v === h.config.id) continue;
      h.node.step(msg(MessageType.PreVoteResponse, v, h.config.id, preTerm, { reject: false }));
      if (h.node.status().role !== 'pre-candidate') break;
    }
    first.messages.push(...drain(h).messages);
  }
  const term = h.node.status().term;
  for (const v of voters) {
    if (v === h.config.id) continue;
    h.node.step(msg(MessageType.RequestVoteResponse, v, h.config.id, term));
    if (h.node.status().role === 'leader') break;
  }
  const rest = drain(h);
  if (h.node.status().role !== 'leader') throw new Error('electLeader: did not become leader');
  return {
    messages: [...first.messages, ...rest.messages],
    committed: [...first.committed, ...rest.committed],
    entries: [...first.entries, ...rest.entries],
    readStates: [...first.readStates, ...rest.readStates],
    hardStates: [...first.hardStates, ...rest.hardStates],
    softState: rest.softState ?? first.softState,
  };
}

/** Acknowledges from `from` everything up to `index` at the node's current term. */
export function ackAppend(h: Handle, from: string, index: number): void {
  h.node.step(msg(MessageType.AppendEntriesResponse, from, h.config.id, h.node.status().term, { index: LogIndex(index) }));
}

export function ofType(ms: readonly Message[], type: MessageType): Message[] {
  return ms.filter((m) => m.type === type);
}

export function termsOf(ents: readonly Entry[]): number[] {
  return ents.map((e) => e.term);
}

/** The log of a storage as terms, index 1 on (only when nothing is compacted). */
export function storedTerms(s: MemoryStorage): number[] {
  const out: number[] = [];
  for (let i = s.firstIndex(); i <= s.lastIndex(); i++) out.push(s.term(LogIndex(i)));
  return out;
}

/**
 * Delivers messages among hand-built nodes until none is left (each node's
 * Readies persisted first). `drop` returns true for a message to lose.
 * Returns every message delivered.
 */
export function pump(nodes: ReadonlyMap<string, Handle>, drop: (m: Message) => boolean = () => false, rounds = 1000): Message[] {
  const delivered: Message[] = [];
  for (let round = 0; round < rounds; round++) {
    const outbox: Message[] = [];
    for (const h of nodes.values()) outbox.push(...drain(h).messages);
    if (outbox.length === 0) return delivered;
    for (const m of outbox) {
      const to = nodes.get(m.to);
      if (to === undefined || drop(m)) continue;
      delivered.push(m);
      to.node.step(m);
    }
  }
  throw new Error('pump: messages never stop');
}
