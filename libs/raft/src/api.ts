/**
 * The public surface of the Raft core, in the style of etcd's RawNode.
 * The core is pure and synchronous: the caller drives it with tick(), step()
 * and the propose family, then drains ready() and calls advance() once the
 * ready's hard state and entries are durable and its messages handed off.
 *
 * Ordering (done in exactly one place, libs/replica): persist hard state +
 * entries (fsync) → send messages → install snapshot / apply committed
 * entries → advance().
 */
import type { LogIndex, NodeId, Random, Term } from '@fencer/base';
import type { ConfChange, ConfState, Entry, HardState, RaftStorage, Snapshot } from './types.js';
import type { DropReason } from './message-check.js';

export const MessageType = {
  PreVote: 'PreVote',
  PreVoteResponse: 'PreVoteResponse',
  RequestVote: 'RequestVote',
  RequestVoteResponse: 'RequestVoteResponse',
  AppendEntries: 'AppendEntries',
  AppendEntriesResponse: 'AppendEntriesResponse',
  Heartbeat: 'Heartbeat',
  HeartbeatResponse: 'HeartbeatResponse',
  InstallSnapshot: 'InstallSnapshot',
  InstallSnapshotResponse: 'InstallSnapshotResponse',
  TimeoutNow: 'TimeoutNow',
} as const;
export type MessageType = (typeof MessageType)[keyof typeof MessageType];

/** One wire message between replicas. Fields beyond type/from/to/term are set per type. */
export interface Message {
  readonly type: MessageType;
  readonly from: NodeId;
  readonly to: NodeId;
  readonly term: Term;
  /** AppendEntries: index/term of the entry preceding `entries`. Votes: candidate's last log index/term. */
  readonly index?: LogIndex;
  readonly logTerm?: Term;
  readonly entries?: readonly Entry[];
  /** Leader's commit index (AppendEntries, Heartbeat). */
  readonly commit?: LogIndex;
  /** Responses: rejected, with a hint for fast backtracking (the follower's conflicting index/term). */
  readonly reject?: boolean;
  readonly rejectHint?: LogIndex;
  readonly rejectTerm?: Term;
  /** InstallSnapshot: one chunk of a snapshot. */
  readonly snapshotMeta?: Snapshot['meta'];
  readonly snapshotChunk?: Uint8Array;
  readonly snapshotOffset?: number;
  readonly snapshotDone?: boolean;
  readonly snapshotTotalBytes?: number;
  /** ReadIndex round: the id of the read batch that a heartbeat confirms. */
  readonly context?: string;
  /** RequestVote sent because of leadership transfer (skips the leader-lease check). */
  readonly transfer?: boolean;
}

export type Role = 'follower' | 'pre-candidate' | 'candidate' | 'leader';

export interface SoftState {
  readonly leader: NodeId | null;
  readonly role: Role;
}

/** A ReadIndex read that may now be served once the state machine has applied `index`. */
export interface ReadState {
  readonly index: LogIndex;
  readonly requestCtx: string;
}

export interface Ready {
  /** Set when role or leader changed since the last ready. */
  readonly softState?: SoftState;
  /** Set when term, vote or commit changed: persist (fsync) before sending messages. */
  readonly hardState?: HardState;
  /** Entries to persist (may overwrite a suffix from entries[0].index). */
  readonly entries: readonly Entry[];
  /** A snapshot received from the leader to persist and install in the state machine. */
  readonly snapshot?: Snapshot;
  /** Messages to send after the above is durable. */
  readonly messages: readonly Message[];
  /**
   * Committed entries to apply, in order. Some may be among this Ready's
   * `entries` (persist first). They include ConfChange entries (membership
   * is already in force inside the core; the state machine skips them) and
   * each leader's blank entry (Normal, empty data; skip it too).
   */
  readonly committedEntries: readonly Entry[];
  /** ReadIndex requests whose index is known; serve each once applied >= index. */
  readonly readStates: readonly ReadState[];
}

export interface RaftConfig {
  readonly id: NodeId;
  /** Voters and learners at bootstrap when storage is empty; ignored once storage holds a membership. */
  readonly peers?: readonly NodeId[];
  readonly learners?: readonly NodeId[];
  /** Election timeout in ticks; randomised in [electionTicks, 2*electionTicks). */
  readonly electionTicks: number;
  /** Heartbeat interval in ticks. */
  readonly heartbeatTicks: number;
  /**
   * Heartbeat interval in ticks while the group is idle: the leader has
   * appended no entry and begun no read round for an election timeout.
   * Absent: heartbeatTicks always. Idle cells then cost their followers
   * fewer messages, while a working cell keeps heartbeatTicks (a commit
   * reaches followers within it); must be at least heartbeatTicks and below
   * electionTicks, so followers still hear from the leader in every
   * election timeout.
   */
  readonly idleHeartbeatTicks?: number;
  readonly storage: RaftStorage;
  readonly random: Random;
  /** Applied index at restart (entries up to it are already in the state machine). */
  readonly applied?: LogIndex;
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  /**
   * Whether a commit advance is sent to followers at once, in appends that
   * may carry no entries (etcd's behaviour), or waits for the next append
   * or heartbeat, as the Raft paper has it (§5.3: the leader "includes that
   * index in future AppendEntries RPCs (including heartbeats) so that the
   * other servers eventually find out"). Eager costs every follower a
   * message and an answer per commit at low load; lazy leaves followers up
   * to one heartbeat interval behind in applying.
   */
  readonly broadcastCommit: boolean;
  /** Flow control: most entries / bytes in one AppendEntries, and most in-flight appends per follower. */
  readonly maxEntriesPerMsg: number;
  readonly maxBytesPerMsg: number;
  readonly maxInflightMsgs: number;
  /** InstallSnapshot chunk size. */
  readonly snapshotChunkBytes: number;
  /** Test-only: put a known bug back in so the simulator can prove it notices. Off in production. */
  readonly bugs?: Partial<Record<RaftBug, boolean>>;
}

/**
 * The knobs of RaftConfig that have a default. The defaults live in one
 * place, `raftTuningDefault` in config.ts; callers (the replica, the cell
 * node, the simulator) take a Partial of this and override what they mean to.
 */
export type RaftTuning = Pick<
  RaftConfig,
  | 'electionTicks'
  | 'heartbeatTicks'
  | 'idleHeartbeatTicks'
  | 'preVote'
  | 'checkQuorum'
  | 'broadcastCommit'
  | 'maxEntriesPerMsg'
  | 'maxBytesPerMsg'
  | 'maxInflightMsgs'
  | 'snapshotChunkBytes'
>;

export type RaftBug =
  /** Commit an entry of a previous term by counting replicas (Figure 8). */
  | 'commitPreviousTermByCounting'
  /** Answer a vote before it is persisted (vote granted in messages of the same ready, but hard state dropped). */
  | 'voteBeforePersist'
  /** Serve ReadIndex before the leader's blank entry of its term commits. */
  | 'readIndexBeforeBlankCommit'
  /** Start a second membership change before the first commits. */
  | 'concurrentConfChange'
  /** Accept messages from a stale term as if current. */
  | 'acceptStaleTerm'
  /** On losing the connection to the leader, start a real election (term + 1) at once, without a pre-vote. */
  | 'campaignWithoutPreVoteOnConnectionLoss';

export interface Status {
  readonly id: NodeId;
  readonly role: Role;
  readonly term: Term;
  readonly leader: NodeId | null;
  readonly commit: LogIndex;
  readonly applied: LogIndex;
  readonly lastIndex: LogIndex;
  readonly voters: readonly NodeId[];
  readonly learners: readonly NodeId[];
  /** Leader only: per follower, match index and replication state. */
  readonly progress?: Readonly<Record<string, { match: LogIndex; next: LogIndex; state: 'probe' | 'replicate' | 'snapshot' }>>;
}

/** What a RaftNode offers; `createRaftNode(config)` in raw-node.ts builds one. */
export interface RaftNode {
  tick(): void;
  /**
   * A message from a peer. Returns null when it was handled, or why it was
   * dropped untouched (malformed, misaddressed, or from a sender that may
   * not send it; see message-check.ts). Never throws on what a peer sends.
   */
  step(message: Message): DropReason | null;
  /** Appends data as a new entry on the leader; returns its index, or null when not leader (or transfer in progress). */
  propose(data: Uint8Array): LogIndex | null;
  /**
   * Appends a membership change (one server at a time); returns null when
   * not leader, during a transfer, before the leader's own-term entry has
   * committed, or while an earlier change is uncommitted. It takes effect
   * on each server when appended to its log (see conf-history.ts).
   */
  proposeConfChange(change: ConfChange): LogIndex | null;
  /**
   * Starts a ReadIndex read; the answer comes back in a later ready's
   * readStates with requestCtx. Returns false when refused at once (not
   * leader, or too many reads queued). An accepted read is dropped silently
   * if leadership is lost before it completes: the caller fails its pending
   * reads when a Ready's softState shows the node is no longer leader or its
   * hardState carries a new term (it may have lost and regained leadership
   * between two Readies). A leader that cannot reach a majority never
   * answers; with checkQuorum it steps down within an election timeout.
   */
  readIndex(requestCtx: string): boolean;
  transferLeadership(to: NodeId): void;
  /** Start an election now (test helper and for TimeoutNow handling). */
  campaign(): void;
  /** Whether ready() has something; false while a Ready is out (between ready() and advance()). */
  hasReady(): boolean;
  /** Takes the next Ready; must be followed by advance() before the next ready(). */
  ready(): Ready;
  /** The last Ready was handled: its entries, hard state and snapshot are durable and readable from storage, its committed entries applied. */
  advance(): void;
  /** The transport could not reach a peer (the leader falls back to probing it). */
  reportUnreachable(id: NodeId): void;
  /**
   * The transport saw its connection to a peer close or reset (not time
   * out). Reported like a tick: for every peer, whether it leads or not;
   * a follower whose leader it is starts a pre-vote at once (see
   * docs/decisions/0021-crash-detection-by-the-transport.md).
   */
  reportConnectionLost(id: NodeId): void;
  status(): Status;
  /**
   * The membership in force at log position `index` (from the snapshot's
   * index through lastIndex): what a snapshot taken at `index` must record
   * in its meta.conf.
   */
  confStateAt(index: LogIndex): ConfState;
}
