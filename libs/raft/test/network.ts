/**
 * Test harness: a few Raft nodes over an in-memory network, all in one
 * thread, driven by ticks. Seeded, so every run is the same.
 *
 * Each node's Ready is handled in the correct order: persist (snapshot,
 * entries, hard state into its MemoryStorage) → send → install snapshot and
 * apply → advance. Crash drops the node object and keeps its storage;
 * restart builds a new node from that storage, as a process restart would.
 *
 * The harness checks safety as it goes and throws on a violation: at most
 * one leader per term, every node applies the same entry at an index, and
 * no node's commit index goes backwards (across restarts too).
 */
import { NodeId, SeededRandom } from '@fencer/base';
import type { LogIndex } from '@fencer/base';
import {
  EntryType,
  MemoryStorage,
  createRaftNode,
  decodeConfChange,
  defaultRaftConfig,
  type ConfChange,
  type ConfState,
  type Entry,
  type Message,
  type RaftConfig,
  type RaftNode,
  type ReadState,
  type Ready,
} from '../src/index.js';

/** The property a checker guards (the Raft paper's Figure 3, plus reads and the commit index). */
export type SafetyProperty =
  | 'election-safety'
  | 'leader-append-only'
  | 'log-matching'
  | 'leader-completeness'
  | 'state-machine-safety'
  | 'linearizable-read'
  | 'commit-monotonic';

/** What a checker throws: the property it saw broken, so a test can tell which checker caught a bug. */
export class SafetyViolation extends Error {
  override readonly name = 'SafetyViolation';
  constructor(
    readonly property: SafetyProperty,
    detail: string,
  ) {
    super(`SAFETY (${property}): ${detail}`);
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const bytes = (s: string): Uint8Array => encoder.encode(s);
export const text = (b: Uint8Array): string => decoder.decode(b);

/** What the state machine keeps: the applied commands in order, and the index they reached. */
interface MachineState {
  appliedIndex: number;
  commands: string[];
}

export class TestNode {
  node: RaftNode;
  machine: MachineState;
  readStates: ReadState[] = [];
  readies = 0;

  constructor(
    readonly id: NodeId,
    readonly storage: MemoryStorage,
    private readonly makeConfig: (storage: MemoryStorage, applied: number) => RaftConfig,
  ) {
    this.machine = restoreMachine(storage.snapshot().data, storage.snapshot().meta.index);
    this.node = createRaftNode(makeConfig(storage, this.machine.appliedIndex));
  }

  /** A restart: a fresh node over the same storage, the state machine restored from the stored snapshot. */
  restart(): void {
    this.machine = restoreMachine(this.storage.snapshot().data, this.storage.snapshot().meta.index);
    this.readStates = [];
    this.node = createRaftNode(this.makeConfig(this.storage, this.machine.appliedIndex));
  }

  /** Takes a snapshot of the state machine at its applied index and compacts the log below it. */
  snapshotAndCompact(): void {
    const at = this.machine.appliedIndex as LogIndex;
    if (at <= this.storage.snapshot().meta.index) return;
    this.storage.createSnapshot(at, this.node.confStateAt(at), encodeMachine(this.machine));
    this.storage.compact(at);
  }
}

function encodeMachine(m: MachineState): Uint8Array {
  return bytes(JSON.stringify(m));
}

function restoreMachine(data: Uint8Array, index: number): MachineState {
  if (data.byteLength === 0) return { appliedIndex: index, commands: [] };
  const m = JSON.parse(text(data)) as MachineState;
  if (m.appliedIndex !== index) throw new Error(`snapshot data at ${m.appliedIndex} but meta says ${index}`);
  return m;
}

export interface NetworkOptions {
  ids: readonly string[];
  seed?: number;
  /** Overrides for every node's config. */
  config?: Partial<Omit<RaftConfig, 'id' | 'storage' | 'random'>>;
  /** Snapshot and compact a node's log once it applied this many entries past its snapshot. */
  snapshotEvery?: number;
}

interface InFlight {
  readonly m: Message;
  readonly deliverAt: number;
}

export class Network {
  readonly nodes = new Map<string, TestNode>();
  readonly down = new Set<string>();
  readonly rnd: SeededRandom;
  now = 0;
  /** Unreliable network: drop probability and delay range per message (in ticks). */
  dropRate = 0;
  delayTicksMax = 0;
  duplicateRate = 0;
  /** Directed links that drop everything: `${from}>${to}`. */
  private readonly cut = new Set<string>();
  /** Extra filter: return false to drop a message. */
  filter: ((m: Message) => boolean) | null = null;
  /** Called after each Ready is handled (a fault injector may restart the node here). */
  afterReady: ((n: TestNode, rd: Ready) => void) | null = null;
  /** Every message sent, for assertions on traffic. */
  sent: Message[] = [];
  recordSent = false;
  private queue: InFlight[] = [];

  // Safety records.
  readonly leaderOfTerm = new Map<number, string>();
  readonly appliedAt = new Map<number, string>();
  /** Term of the entry applied at each index (by anyone). */
  readonly termAt = new Map<number, number>();
  leaderCompletenessChecks = 0;
  /** Per pending read: the highest index applied anywhere when it began (a linearizable read must see it). */
  private readonly readFloor = new Map<string, number>();
  private maxApplied = 0;
  private readonly commitSeen = new Map<string, number>();
  private readonly options: NetworkOptions;

  constructor(options: NetworkOptions) {
    this.options = options;
    this.rnd = new SeededRandom(options.seed ?? 1);
    for (const id of options.ids) this.addNode(id, options.ids);
  }

  /** Adds a node; with `peers` it bootstraps a fresh cluster, without it joins empty (to be added by a ConfChange). */
  addNode(id: string, peers: readonly string[] | undefined): TestNode {
    const random = this.rnd.fork();
    const storage = new MemoryStorage();
    const makeConfig = (s: MemoryStorage, applied: number): RaftConfig =>
      defaultRaftConfig({
        id: NodeId(id),
        storage: s,
        random,
        applied: applied as LogIndex,
        ...(peers !== undefined ? { peers: peers.map(NodeId) } : {}),
        ...this.options.config,
      });
    const n = new TestNode(NodeId(id), storage, makeConfig);
    this.nodes.set(id, n);
    return n;
  }

  get(id: string): TestNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new Error(`no node ${id}`);
    return n;
  }

  /** Handles every pending Ready of every live node; returns whether anything happened. */
  processReadies(): boolean {
    let any = false;
    for (const [id, n] of this.nodes) {
      if (this.down.has(id)) continue;
      let guard = 0;
      while (n.node.hasReady()) {
        if (++guard > 1000) throw new Error(`${id} never runs out of Readies`);
        const rd = n.node.ready();
        this.handleReady(n, rd);
        this.afterReady?.(n, rd);
        any = true;
      }
    }
    return any;
  }

  private handleReady(n: TestNode, rd: Ready): void {
    n.readies++;
    const first = rd.entries[0];
    if (first !== undefined && n.node.status().role === 'leader' && first.index <= n.storage.lastIndex()) {
      throw new SafetyViolation('leader-append-only', `leader ${n.id} overwrites its log from ${first.index}`);
    }
    // 1. Persist: snapshot, then entries (overwriting a suffix), then hard state.
    if (rd.snapshot !== undefined) n.storage.applySnapshot(rd.snapshot);
    if (rd.entries.length > 0) n.storage.append(rd.entries);
    if (rd.hardState !== undefined) {
      n.storage.setHardState(rd.hardState);
      this.checkCommit(n.id, rd.hardState.commit);
    }
    // 2. Send.
    for (const m of rd.messages) this.send(m);
    // 3. Install the snapshot, apply committed entries.
    if (rd.snapshot !== undefined) {
      n.machine = restoreMachine(rd.snapshot.data, rd.snapshot.meta.index);
      this.checkSnapshot(n.machine);
    }
    for (const e of rd.committedEntries) this.apply(n, e);
    for (const rs of rd.readStates) {
      const floor = this.readFloor.get(rs.requestCtx);
      if (floor !== undefined && rs.index < floor) {
        throw new SafetyViolation(
          'linearizable-read',
          `read ${rs.requestCtx} at ${rs.index} misses writes applied up to ${floor} before it began`,
        );
      }
      this.readFloor.delete(rs.requestCtx);
      n.readStates.push(rs);
    }
    if (rd.softState?.role === 'leader') {
      this.recordLeader(n.id, n.node.status().term);
      this.checkLeaderCompleteness(n);
    }
    // 4. Acknowledge.
    n.node.advance();
    const snapshotEvery = this.options.snapshotEvery;
    if (snapshotEvery !== undefined && n.machine.appliedIndex - n.storage.snapshot().meta.index >= snapshotEvery) {
      n.snapshotAndCompact();
    }
  }

  private apply(n: TestNode, e: Entry): void {
    if (e.index !== n.machine.appliedIndex + 1) {
      throw new Error(`${n.id} applies ${e.index} after ${n.machine.appliedIndex}: gap or repeat`);
    }
    const repr = describeEntry(e);
    const seen = this.appliedAt.get(e.index);
    this.termAt.set(e.index, e.term);
    if (seen === undefined) this.appliedAt.set(e.index, repr);
    else if (seen !== repr)
      throw new SafetyViolation('state-machine-safety', `${n.id} applied ${repr} at ${e.index}, another node applied ${seen}`);
    n.machine.appliedIndex = e.index;
    this.maxApplied = Math.max(this.maxApplied, e.index);
    if (e.type === EntryType.Normal && e.data.byteLength > 0) n.machine.commands.push(text(e.data));
  }

  private checkSnapshot(m: MachineState): void {
    // Every command in a snapshot must agree with what nodes applied.
    let cmdAt = 0;
    for (let i = 1; i <= m.appliedIndex; i++) {
      const seen = this.appliedAt.get(i);
      const cmd = seen === undefined ? undefined : commandOf(seen);
      if (cmd === undefined) continue;
      if (cmd !== m.commands[cmdAt]) throw new SafetyViolation('state-machine-safety', `snapshot disagrees at ${i}: ${seen}`);
      cmdAt++;
    }
  }

  private recordLeader(id: string, term: number): void {
    const other = this.leaderOfTerm.get(term);
    if (other !== undefined && other !== id)
      throw new SafetyViolation('election-safety', `two leaders in term ${term}: ${other} and ${id}`);
    this.leaderOfTerm.set(term, id);
  }

  /**
   * Leader Completeness (§5.4): a new leader's log holds every entry that
   * any node applied (committed), with the same term.
   */
  private checkLeaderCompleteness(n: TestNode): void {
    const s = n.storage;
    for (const [index, term] of this.termAt) {
      if (index < s.firstIndex()) continue;
      if (index > s.lastIndex()) throw new SafetyViolation('leader-completeness', `new leader ${n.id} lacks committed entry ${index}`);
      if (s.term(index as LogIndex) !== term) {
        throw new SafetyViolation(
          'leader-completeness',
          `new leader ${n.id} has term ${s.term(index as LogIndex)} at committed ${index}, not ${term}`,
        );
      }
    }
    this.leaderCompletenessChecks++;
  }

  /** Log Matching (§5.3): two logs with the same term at an index hold the same entries up to it. */
  checkLogMatching(): void {
    const ns = [...this.nodes.values()];
    for (let i = 0; i < ns.length; i++) {
      for (let j = i + 1; j < ns.length; j++) {
        const a = (ns[i] as TestNode).storage;
        const b = (ns[j] as TestNode).storage;
        const lo = Math.max(a.firstIndex(), b.firstIndex());
        const hi = Math.min(a.lastIndex(), b.lastIndex());
        let matchedAbove = false;
        for (let k = hi; k >= lo; k--) {
          const same = a.term(k as LogIndex) === b.term(k as LogIndex);
          if (matchedAbove && !same)
            throw new SafetyViolation('log-matching', `logs of ${ns[i]?.id} and ${ns[j]?.id} match at a later index but differ at ${k}`);
          if (same) matchedAbove = true;
        }
      }
    }
  }

  private checkCommit(id: string, commit: number): void {
    const before = this.commitSeen.get(id) ?? 0;
    if (commit < before) throw new SafetyViolation('commit-monotonic', `${id} commit went back from ${before} to ${commit}`);
    this.commitSeen.set(id, commit);
  }

  private send(m: Message): void {
    if (this.recordSent) this.sent.push(m);
    if (this.dropRate > 0 && this.rnd.chance(this.dropRate)) return;
    const copies = this.duplicateRate > 0 && this.rnd.chance(this.duplicateRate) ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      const delay = this.delayTicksMax > 0 ? this.rnd.int(this.delayTicksMax + 1) : 0;
      this.queue.push({ m, deliverAt: this.now + delay });
    }
  }

  private linked(from: string, to: string): boolean {
    return !this.down.has(from) && !this.down.has(to) && !this.cut.has(`${from}>${to}`);
  }

  /** Delivers every message due now; returns whether any was delivered. */
  deliver(): boolean {
    const due = this.queue.filter((f) => f.deliverAt <= this.now);
    if (due.length === 0) return false;
    this.queue = this.queue.filter((f) => f.deliverAt > this.now);
    for (const { m } of due) {
      if (!this.linked(m.from, m.to)) continue;
      if (this.filter !== null && !this.filter(m)) continue;
      this.get(m.to).node.step(m);
    }
    return true;
  }

  /** Runs Readies and deliveries until nothing more happens at this instant. */
  stabilize(): void {
    for (let round = 0; round < 10_000; round++) {
      const a = this.processReadies();
      const b = this.deliver();
      if (!a && !b) return;
    }
    throw new Error('network did not settle in 10000 rounds');
  }

  tick(n = 1): void {
    for (let i = 0; i < n; i++) {
      this.now++;
      for (const [id, node] of this.nodes) if (!this.down.has(id)) node.node.tick();
      this.stabilize();
    }
  }

  /** Ticks until `done()` holds, at most maxTicks; returns whether it held. */
  tickUntil(done: () => boolean, maxTicks: number): boolean {
    for (let i = 0; i < maxTicks; i++) {
      if (done()) return true;
      this.tick();
    }
    return done();
  }

  /** Starts a ReadIndex read on a node, remembering what it must see. */
  read(id: string, requestCtx: string): boolean {
    const ok = this.get(id).node.readIndex(requestCtx);
    if (ok) this.readFloor.set(requestCtx, this.maxApplied);
    return ok;
  }

  // ------------------------------------------------------------ faults

  /** Cuts a node off from everyone (both directions). */
  isolate(id: string): void {
    for (const other of this.nodes.keys()) {
      if (other === id) continue;
      this.cut.add(`${id}>${other}`);
      this.cut.add(`${other}>${id}`);
    }
  }

  /** Splits into groups that cannot talk to each other. */
  partition(...groups: (readonly string[])[]): void {
    this.heal();
    for (const g of groups) {
      for (const other of this.nodes.keys()) {
        if (g.includes(other)) continue;
        for (const id of g) {
          this.cut.add(`${id}>${other}`);
          this.cut.add(`${other}>${id}`);
        }
      }
    }
  }

  cutLink(from: string, to: string): void {
    this.cut.add(`${from}>${to}`);
  }

  reconnect(id: string): void {
    for (const link of [...this.cut]) {
      const [a, b] = link.split('>');
      if (a === id || b === id) this.cut.delete(link);
    }
  }

  heal(): void {
    this.cut.clear();
  }

  /** Stops a node: its object is gone, its storage stays, messages to it are lost. */
  crash(id: string): void {
    this.down.add(id);
    this.queue = this.queue.filter((f) => f.m.to !== id && f.m.from !== id);
  }

  restart(id: string): void {
    const n = this.get(id);
    n.restart();
    this.down.delete(id);
    this.checkCommit(id, n.node.status().commit);
  }

  // --------------------------------------------------------- observers

  live(): TestNode[] {
    return [...this.nodes.values()].filter((n) => !this.down.has(n.id));
  }

  /** Live leaders that can reach a majority... simply: live nodes that believe they lead, highest term first. */
  leaders(): TestNode[] {
    return this.live()
      .filter((n) => n.node.status().role === 'leader')
      .sort((a, b) => b.node.status().term - a.node.status().term);
  }

  /** The single leader of the highest term among live nodes, or undefined. */
  leader(): TestNode | undefined {
    return this.leaders()[0];
  }

  /** Ticks until exactly one leader exists in the latest term among connected live nodes; returns it. */
  waitLeader(maxTicks = 200): TestNode {
    let found: TestNode | undefined;
    this.tickUntil(() => {
      // Leaders cut off from a majority do not count (the course tests look at connected servers only).
      const ls = this.leaders().filter((n) => this.reachesMajority(n.id));
      if (ls.length === 0) return false;
      const top = ls[0] as TestNode;
      const topTerm = top.node.status().term;
      // A live node with a higher term than the leader means an election is under way.
      const higher = this.live().some((n) => n.node.status().term > topTerm && !this.isCutOff(n.id));
      if (higher) return false;
      found = top;
      return true;
    }, maxTicks);
    if (found === undefined) {
      const states = this.live().map((n) => {
        const st = n.node.status();
        return `${n.id}:${st.role}/t${st.term}/c${st.commit}/li${st.lastIndex}/v[${st.voters.join('')}]/l[${st.learners.join('')}]`;
      });
      throw new Error(
        `no leader within ${maxTicks} ticks: ${states.join(' ')}${this.down.size > 0 ? ` down:${[...this.down].join('')}` : ''}`,
      );
    }
    return found;
  }

  /** Whether `id` is live and linked both ways with enough live nodes to form a majority of all nodes. */
  reachesMajority(id: string): boolean {
    if (this.down.has(id)) return false;
    let reach = 1;
    for (const o of this.live()) {
      if (o.id !== id && !this.cut.has(`${id}>${o.id}`) && !this.cut.has(`${o.id}>${id}`)) reach++;
    }
    return reach > this.nodes.size / 2;
  }

  private isCutOff(id: string): boolean {
    const others = this.live().filter((n) => n.id !== id);
    return others.every((o) => this.cut.has(`${id}>${o.id}`) || this.cut.has(`${o.id}>${id}`));
  }

  /** How many nodes applied a command at `index`, and which command (the harness already checked they agree). */
  nApplied(index: number): { count: number; command: string | undefined } {
    let count = 0;
    for (const n of this.nodes.values()) if (n.machine.appliedIndex >= index) count++;
    const seen = this.appliedAt.get(index);
    return { count, command: seen === undefined ? undefined : commandOf(seen) };
  }

  /**
   * The course tests' one(): submit a command to whoever leads, and wait
   * until at least `expected` nodes applied it at the index the leader
   * gave; retry with the next leader while maxTicks allow.
   */
  one(command: string, expected: number, maxTicks = 400): number {
    const start = this.now;
    while (this.now - start < maxTicks) {
      let index: LogIndex | null = null;
      for (const n of this.live()) {
        if (n.node.status().role !== 'leader') continue;
        index = n.node.propose(bytes(command));
        if (index !== null) break;
      }
      if (index !== null) {
        const at = index;
        const ok = this.tickUntil(() => {
          const r = this.nApplied(at);
          return r.count >= expected && r.command === command;
        }, 60);
        if (ok) return at;
      } else {
        this.tick();
      }
    }
    throw new Error(`one(${command}) failed to reach agreement on ${expected} nodes in ${maxTicks} ticks`);
  }

  /**
   * Proposes a membership change through whoever leads (retrying while a
   * leader refuses, e.g. before its blank entry commits) and waits until
   * the leader has committed it. Returns the entry's index.
   */
  changeConf(change: ConfChange, maxTicks = 300): number {
    const start = this.now;
    while (this.now - start < maxTicks) {
      const l = this.leader();
      const index = l?.node.proposeConfChange(change) ?? null;
      if (l !== undefined && index !== null) {
        if (this.tickUntil(() => l.node.status().commit >= index, 100)) return index;
      } else {
        this.tick();
      }
    }
    throw new Error(`membership change ${JSON.stringify(change)} did not commit in ${maxTicks} ticks`);
  }

  /** Everything for one node's log: [term, index] pairs, for comparisons. */
  logOf(id: string): string {
    const s = this.get(id).storage;
    const out: string[] = [];
    for (let i = s.firstIndex(); i <= s.lastIndex(); i++) out.push(`${s.term(i as LogIndex)}`);
    return out.join(',');
  }
}

function describeEntry(e: Entry): string {
  if (e.type === EntryType.ConfChange) {
    const c = decodeConfChange(e.data);
    return `conf:${c.type}:${c.node}:t${e.term}`;
  }
  return e.data.byteLength === 0 ? `blank:t${e.term}` : `cmd:t${e.term}:${text(e.data)}`;
}

function commandOf(repr: string): string | undefined {
  const m = /^cmd:t\d+:(.*)$/s.exec(repr);
  return m === null ? undefined : m[1];
}

export function sortedConf(c: ConfState): string {
  return `voters=${[...c.voters].sort().join(',')} learners=${[...c.learners].sort().join(',')}`;
}
