/**
 * The Raft state machine (etcd's raft.go): roles, terms, votes, the leader's
 * replication and commit rules, ReadIndex, leadership transfer, snapshots
 * and membership. Pure and synchronous: it reacts to tick(), step() and the
 * propose family by changing its state and queueing messages; raw-node.ts
 * turns that into Ready/advance.
 *
 * Section references are to the Raft paper (Ongaro & Ousterhout 2014) and,
 * for PreVote, CheckQuorum, leadership transfer, ReadIndex and membership,
 * to Ongaro's dissertation (2014) and its 2015 erratum on membership change.
 */
import { assert, LogIndex, Term } from '@fencer/base';
import type { NodeId, Random } from '@fencer/base';
import { MessageType } from './api.js';
import type { Message, RaftBug, RaftConfig, ReadState, Role, SoftState } from './api.js';
import { ConfChangeType, EntryType } from './types.js';
import type { ConfChange, ConfState, Entry, HardState, Snapshot } from './types.js';
import { RaftLog } from './raft-log.js';
import { Progress } from './progress.js';
import { ConfHistory } from './conf-history.js';
import { applyConfChange, encodeConfChange } from './conf-change.js';
import { ReadIndexQueue } from './read-index.js';
import { validateRaftConfig } from './config.js';
import { pendingReadIndexMax, snapshotBytesMax, startupScanBytes, uncommittedEntriesMax } from './limits.js';
import { checkMessage, DropReason } from './message-check.js';

const emptyData = new Uint8Array(0);

const responseTypes: ReadonlySet<MessageType> = new Set([
  MessageType.PreVoteResponse,
  MessageType.RequestVoteResponse,
  MessageType.AppendEntriesResponse,
  MessageType.HeartbeatResponse,
  MessageType.InstallSnapshotResponse,
]);

function isResponse(type: MessageType): boolean {
  return responseTypes.has(type);
}

/** What only a leader sends to its followers in its term. */
function isLeaderRequest(type: MessageType): boolean {
  return type === MessageType.AppendEntries || type === MessageType.Heartbeat || type === MessageType.InstallSnapshot;
}

type CampaignKind = 'pre-vote' | 'election' | 'transfer';

/** A candidate's claim to lead: its last log entry, then its id (lower first) to break ties. */
interface Claim {
  readonly id: NodeId;
  readonly lastTerm: number;
  readonly lastIndex: number;
}

/** Whether claim `a` ranks ahead of claim `b`: a more up-to-date log (§5.4.1), or as up to date and a lower id. */
function ranksAhead(a: Claim, b: Claim): boolean {
  if (a.lastTerm !== b.lastTerm) return a.lastTerm > b.lastTerm;
  if (a.lastIndex !== b.lastIndex) return a.lastIndex > b.lastIndex;
  return a.id < b.id;
}

/** A snapshot being assembled from InstallSnapshot chunks. */
interface SnapshotReceive {
  readonly from: NodeId;
  readonly meta: Snapshot['meta'];
  readonly buffer: Uint8Array;
  received: number;
}

export class Raft {
  readonly id: NodeId;
  term = 0;
  vote: NodeId | null = null;
  lead: NodeId | null = null;
  role: Role = 'follower';
  readonly log: RaftLog;
  readonly conf: ConfHistory;
  voters = new Set<NodeId>();
  learners = new Set<NodeId>();
  /** Leader only: one entry per member, the leader's own included (its match is what it has persisted). */
  readonly progress = new Map<NodeId, Progress>();
  /** maybeCommit's working space (its contents mean nothing between calls). */
  private readonly matchScratch: number[] = [];
  private readonly votes = new Map<NodeId, boolean>();

  /** Ticks since the last election timeout reset; on a follower, since it last heard from a leader. */
  electionElapsed = 0;
  private heartbeatElapsed = 0;
  private randomizedElectionTimeout = 0;
  leadTransferee: NodeId | null = null;
  /** Leader: index of the latest ConfChange it appended; a new one waits until this commits. */
  private pendingConfIndex = 0;
  private readonly reads = new ReadIndexQueue();
  private snapshotReceive: SnapshotReceive | null = null;
  /** Leader: proposals or a commit advance wait to be broadcast when the next Ready is built. */
  private needBcast = false;
  /** Bug 'voteBeforePersist': the term whose granted vote is left out of the hard state to persist. */
  private hiddenVoteTerm = -1;
  /**
   * A pre-campaign started because the connection to the leader was lost
   * (reportConnectionLost): it ranks pre-votes against its own claim so
   * that, when every follower of a dead leader starts one at once, one of
   * them wins and the others stand aside (see handleFastPreVote).
   */
  private fastPreVote = false;
  /** The claim this follower stood aside for in the pre-vote round at `term + 1`; it grants no pre-vote ranked behind it. */
  private preVoteYield: Claim | null = null;

  msgs: Message[] = [];
  readStates: ReadState[] = [];

  private readonly electionTimeout: number;
  private readonly heartbeatTimeout: number;
  private readonly idleHeartbeatTimeout: number;
  /** Leader ticks since it last appended an entry or began a read round; idle from an election timeout on. */
  private ticksSinceWork = 0;
  private readonly random: Random;
  private readonly bugs: Partial<Record<RaftBug, boolean>>;

  constructor(private readonly config: RaftConfig) {
    validateRaftConfig(config);
    this.id = config.id;
    this.electionTimeout = config.electionTicks;
    this.heartbeatTimeout = config.heartbeatTicks;
    this.idleHeartbeatTimeout = config.idleHeartbeatTicks ?? config.heartbeatTicks;
    this.random = config.random;
    this.bugs = config.bugs ?? {};

    const storage = config.storage;
    const { hardState, conf: storedConf } = storage.initialState();
    this.log = new RaftLog(storage);
    const snapshotIndex = storage.firstIndex() - 1;
    assert(storage.snapshot().meta.index === snapshotIndex, 'storage snapshot index must sit just below its first index');
    this.conf = new ConfHistory(snapshotIndex, storedConf);
    this.scanConfChanges(snapshotIndex + 1, storage.lastIndex());
    this.log.onAppend = (ents) => this.onLogAppend(ents);

    this.term = hardState.term;
    this.vote = hardState.vote;
    const isEmpty = storage.lastIndex() === 0 && hardState.term === 0;
    const noConf = storedConf.voters.length === 0 && storedConf.learners.length === 0;
    if (isEmpty && noConf && (config.peers ?? []).length > 0) this.bootstrap(config.peers ?? [], config.learners ?? []);
    else this.log.commitTo(hardState.commit);

    const applied = config.applied ?? snapshotIndex;
    assert(
      applied >= snapshotIndex && applied <= this.log.committed,
      `applied ${applied} outside [snapshot ${snapshotIndex}, commit ${this.log.committed}]`,
    );
    this.log.appliedTo(applied);
    this.applyCurrentConf();
    this.becomeFollower(this.term, null);
  }

  // ---------------------------------------------------------------- inputs

  tick(): void {
    if (this.role === 'leader') this.tickHeartbeat();
    else this.tickElection();
  }

  /**
   * Handles a message from a peer. Returns null when handled (a stale one
   * is handled by answering or ignoring it, as the paper says), or why it
   * was dropped untouched: nothing a peer sends reaches an assertion.
   */
  step(m: Message): DropReason | null {
    const malformed = checkMessage(m, this.id);
    if (malformed !== null) return malformed;
    if (m.term < this.term && !this.bug('acceptStaleTerm')) {
      this.answerStale(m);
      return null;
    }
    const refused = this.checkSender(m);
    if (refused !== null) return refused;
    if (m.term > this.term) {
      if (m.type === MessageType.PreVote || m.type === MessageType.RequestVote) {
        // Dissertation §4.2.3: a server that heard from a leader within the
        // minimum election timeout ignores vote requests, so a removed or
        // partitioned server cannot depose a healthy leader. A transfer
        // (TimeoutNow) is deliberate and passes.
        const inLease = this.config.checkQuorum && this.lead !== null && this.electionElapsed < this.electionTimeout;
        if (inLease && m.transfer !== true) return null;
      }
      if (m.type === MessageType.PreVote) {
        // A pre-vote never changes our term: the pre-candidate has not started a real election.
      } else if (m.type === MessageType.PreVoteResponse && m.reject !== true) {
        // A granted pre-vote carries the term we would campaign at; we move to it when we win.
      } else {
        this.becomeFollower(m.term, isLeaderRequest(m.type) ? m.from : null);
      }
    }
    this.dispatch(m);
    return null;
  }

  /**
   * Who may send what, for messages of our term or above. Requests are
   * taken from any node, members or not (dissertation §4.1: "servers
   * process incoming RPC requests without consulting their current
   * configurations"): a joining node knows no configuration until the
   * leader's appends bring it, and a candidate or leader may be a member
   * only of a configuration this node has not appended yet. Responses are
   * different: this node sent requests only to members of its own
   * configuration, so a response from anyone else answers nothing (etcd's
   * leader likewise ignores a response from a node without progress).
   */
  private checkSender(m: Message): DropReason | null {
    if (isResponse(m.type) && !this.voters.has(m.from) && !this.learners.has(m.from)) return DropReason.NotMember;
    // §5.2 Election Safety: at most one leader per term, so once we know this
    // term's leader, a leader's message in it from anyone else is not one.
    const otherLeads = this.lead !== null && this.lead !== m.from;
    if (m.type === MessageType.TimeoutNow) {
      // It starts an election past every lease, so only this term's leader may
      // send it: the transferee has acknowledged the leader's log, so it is in
      // the leader's term (a restart may have made it forget who leads).
      return m.term === this.term && !otherLeads ? null : DropReason.NotLeader;
    }
    if (isLeaderRequest(m.type) && m.term === this.term && otherLeads) return DropReason.NotLeader;
    return null;
  }

  /** §5.1: "If a server receives a request with a stale term number, it rejects the request." */
  private answerStale(m: Message): void {
    if ((this.config.checkQuorum || this.config.preVote) && (m.type === MessageType.AppendEntries || m.type === MessageType.Heartbeat)) {
      // Tell the stale leader our term so it steps down. Without this, a
      // leader cut off by check-quorum or pre-vote could go on believing.
      this.send({ type: MessageType.AppendEntriesResponse, to: m.from, index: LogIndex(0) });
    } else if (m.type === MessageType.PreVote) {
      this.send({ type: MessageType.PreVoteResponse, to: m.from, reject: true });
    } else if (m.type === MessageType.RequestVote) {
      // Figure 2: the reply carries currentTerm "for candidate to update
      // itself". Staying silent can deadlock: a candidate that the voters
      // no longer contact (they think it a learner, say) would never learn
      // the term it has to exceed.
      this.send({ type: MessageType.RequestVoteResponse, to: m.from, reject: true });
    }
  }

  private dispatch(m: Message): void {
    if (m.type === MessageType.PreVote || m.type === MessageType.RequestVote) {
      this.handleVoteRequest(m);
      return;
    }
    switch (this.role) {
      case 'leader':
        this.stepLeader(m);
        return;
      case 'candidate':
      case 'pre-candidate':
        this.stepCandidate(m);
        return;
      case 'follower':
        this.stepFollower(m);
        return;
    }
  }

  propose(data: Uint8Array): LogIndex | null {
    if (!this.canAcceptProposal()) return null;
    return LogIndex(this.appendEntry(EntryType.Normal, data));
  }

  proposeConfChange(change: ConfChange): LogIndex | null {
    if (!this.canAcceptProposal()) return null;
    // One change at a time (dissertation §4.1): the next waits until the last commits.
    if (this.pendingConfIndex > this.log.committed && !this.bug('concurrentConfChange')) return null;
    // The 2015 fix: a leader must commit an entry of its own term before it
    // changes membership, or a change by a previous leader that it has not
    // seen committed could combine with this one into disjoint majorities.
    if (!this.committedEntryInCurrentTerm()) return null;
    const next = applyConfChange(this.conf.current(), change);
    if (next.voters.length === 0) return null;
    const index = this.appendEntry(EntryType.ConfChange, encodeConfChange(change));
    this.pendingConfIndex = index;
    return LogIndex(index);
  }

  /** Returns false when refused (not leader, or too many reads queued). */
  readIndex(requestCtx: string): boolean {
    if (this.role !== 'leader') return false;
    if (this.reads.queued >= pendingReadIndexMax) return false;
    // Dissertation §6.4: until its blank entry commits, a new leader does not
    // know the commit index of the previous term, so reads must wait.
    if (!this.committedEntryInCurrentTerm() && !this.bug('readIndexBeforeBlankCommit')) {
      this.reads.awaitingBlank.push(requestCtx);
      this.reads.queued++;
      return true;
    }
    this.joinRead(requestCtx);
    return true;
  }

  transferLeadership(to: NodeId): void {
    if (this.role !== 'leader' || to === this.id) return;
    if (!this.voters.has(to)) return;
    if (this.leadTransferee === to) return;
    if (this.leadTransferee !== null) this.abortLeaderTransfer();
    // The transfer aborts if it has not completed within one election timeout.
    this.electionElapsed = 0;
    this.leadTransferee = to;
    const pr = this.progress.get(to);
    assert(pr !== undefined, 'every voter has a progress on the leader');
    if (pr.match === this.log.lastIndex()) this.sendTimeoutNow(to);
    else this.maybeSendAppend(to, true);
  }

  /** Starts an election now (with a pre-vote first when enabled). */
  campaign(): void {
    if (this.role === 'leader') return;
    this.startCampaign(this.config.preVote ? 'pre-vote' : 'election');
  }

  /**
   * The transport saw its connection to `id` close or reset, not time out:
   * when `id` is the leader we follow, its process most likely died (the
   * kernel closes a dead process's sockets at once). The follower then
   * starts a pre-vote at once rather than waiting out its election timer.
   * This is safe and cannot depose a live leader (docs/decisions/0021):
   * a pre-vote changes no term and no vote, and the leader's other
   * followers, still hearing from it, ignore the pre-vote (the lease check
   * in step()), so it wins only if a majority has lost the leader too.
   * Without PreVote and CheckQuorum that argument does not hold, and the
   * timer alone decides.
   */
  reportConnectionLost(id: NodeId): void {
    if (this.role !== 'follower' || this.lead !== id || id === this.id || !this.promotable()) return;
    if (this.bug('campaignWithoutPreVoteOnConnectionLoss')) {
      this.startCampaign('election');
      return;
    }
    if (!this.config.preVote || !this.config.checkQuorum) return;
    // electionElapsed is left as it is: should this round fail, the timer still fires when it would have.
    this.startCampaign('pre-vote');
    // A single voter has already won and leads; otherwise the round is on.
    this.fastPreVote = (this.role as Role) === 'pre-candidate';
  }

  reportUnreachable(id: NodeId): void {
    if (this.role !== 'leader') return;
    const pr = this.progress.get(id);
    // An append in flight may be lost: stop streaming and probe again.
    if (pr !== undefined && pr.state === 'replicate') pr.becomeProbe();
  }

  // ------------------------------------------------------- ready plumbing

  softState(): SoftState {
    return { leader: this.lead, role: this.role };
  }

  hardState(): HardState {
    return { term: Term(this.term), vote: this.vote, commit: LogIndex(this.log.committed) };
  }

  /** The hard state to persist; with bug 'voteBeforePersist' it leaves out a vote granted this term. */
  hardStateToPersist(): HardState {
    const hs = this.hardState();
    if (this.bug('voteBeforePersist') && this.hiddenVoteTerm === this.term && hs.vote !== this.id) return { ...hs, vote: null };
    return hs;
  }

  hasPendingFlush(): boolean {
    return this.role === 'leader' && (this.needBcast || this.reads.hasUnsent());
  }

  /** Builds the messages deferred to Ready time: appends of new entries and commit, and the open read round's heartbeat. */
  flush(): void {
    if (this.role !== 'leader') return;
    if (this.needBcast) {
      this.needBcast = false;
      this.bcastAppend();
    }
    const round = this.reads.takeUnsent();
    if (round !== undefined) this.bcastHeartbeat(String(round.id));
  }

  /**
   * The caller persisted everything up to the log's stable index. The
   * leader counts its own log toward commitment only from here: it
   * acknowledges its entries once they are durable, as followers do.
   */
  onPersisted(): void {
    this.conf.compact(Math.min(this.log.firstIndex() - 1, this.log.committed));
    if (this.role !== 'leader') return;
    const self = this.progress.get(this.id);
    if (self === undefined) return;
    const stable = this.log.stableLastIndex();
    if (self.maybeUpdate(stable) && this.maybeCommit()) this.onCommitAdvanced();
  }

  confStateAt(index: number): ConfState {
    assert(index <= this.log.lastIndex(), `configuration at ${index} is past the last index ${this.log.lastIndex()}`);
    return this.conf.at(index);
  }

  // --------------------------------------------------------------- roles

  private becomeFollower(term: number, lead: NodeId | null): void {
    this.reset(term);
    this.lead = lead;
    this.role = 'follower';
  }

  private becomePreCandidate(): void {
    assert(this.role !== 'leader', 'a leader does not pre-campaign');
    // A pre-candidate keeps its term and vote: it only asks whether it could win.
    this.votes.clear();
    this.lead = null;
    this.role = 'pre-candidate';
    this.fastPreVote = false;
    this.preVoteYield = null;
  }

  private becomeCandidate(): void {
    assert(this.role !== 'leader', 'a leader does not campaign');
    // §5.2: "a follower increments its current term and transitions to candidate state. It then votes for itself".
    this.reset(this.term + 1);
    this.vote = this.id;
    this.role = 'candidate';
  }

  private becomeLeader(): void {
    assert(this.role === 'candidate', `only a candidate becomes leader, not a ${this.role}`);
    this.reset(this.term);
    this.lead = this.id;
    this.role = 'leader';
    const lastIndex = this.log.lastIndex();
    for (const id of this.members()) {
      const pr = new Progress(lastIndex + 1, this.config.maxInflightMsgs);
      if (id === this.id) {
        pr.match = this.log.stableLastIndex();
        pr.becomeReplicate();
      }
      pr.recentActive = true;
      this.progress.set(id, pr);
    }
    // Conservative: entries of earlier terms may hold an uncommitted change.
    this.pendingConfIndex = lastIndex;
    // §8: "each leader commit a blank no-op entry into the log at the start of its term".
    this.appendEntry(EntryType.Normal, emptyData);
  }

  private reset(term: number): void {
    if (term !== this.term) {
      assert(term > this.term, `term went back from ${this.term} to ${term}`);
      this.term = term;
      this.vote = null;
    }
    this.lead = null;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.ticksSinceWork = 0;
    this.randomizedElectionTimeout = this.electionTimeout + this.random.int(this.electionTimeout);
    this.leadTransferee = null;
    this.votes.clear();
    this.progress.clear();
    this.pendingConfIndex = 0;
    this.reads.clear();
    this.needBcast = false;
    this.snapshotReceive = null;
    this.fastPreVote = false;
    this.preVoteYield = null;
  }

  private promotable(): boolean {
    return this.voters.has(this.id) && !this.log.hasPendingSnapshot();
  }

  private *members(): Iterable<NodeId> {
    yield* this.voters;
    yield* this.learners;
  }

  // ------------------------------------------------------------- elections

  private tickElection(): void {
    this.electionElapsed++;
    if (this.electionElapsed < this.randomizedElectionTimeout) return;
    if (this.promotable()) {
      this.electionElapsed = 0;
      // §5.2: "If a follower receives no communication over a period of time
      // called the election timeout, then it assumes there is no viable leader".
      this.startCampaign(this.config.preVote ? 'pre-vote' : 'election');
    } else if (!this.voters.has(this.id) && this.lead !== null) {
      this.forgetLeader();
    }
  }

  /**
   * A node that cannot campaign (a learner, or one outside the
   * configuration) assumes the same as a follower after the same timeout,
   * that there is no viable leader, but has no election to start: it only
   * stops naming the old leader. Without this it would name a leader that
   * left the cell forever, and whoever gates peers on the leader it follows
   * (a cell node refuses strangers while it follows one) would refuse the
   * member that leads now. Its term and log stay: the next leader's
   * messages carry a higher term and make it follow that leader.
   */
  private forgetLeader(): void {
    assert(
      this.role === 'follower' && !this.voters.has(this.id),
      `only a follower that cannot campaign forgets its leader, not a ${this.role}`,
    );
    this.lead = null;
  }

  private startCampaign(kind: CampaignKind): void {
    if (!this.promotable()) return;
    let type: MessageType;
    let term: number;
    if (kind === 'pre-vote') {
      this.becomePreCandidate();
      type = MessageType.PreVote;
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      type = MessageType.RequestVote;
      term = this.term;
    }
    if (this.poll(this.id, true) === 'won') {
      // A single voter wins at once.
      if (kind === 'pre-vote') this.startCampaign('election');
      else this.becomeLeader();
      return;
    }
    const index = LogIndex(this.log.lastIndex());
    const logTerm = Term(this.log.lastTerm());
    for (const id of this.voters) {
      if (id === this.id) continue;
      this.send({ type, to: id, term: Term(term), index, logTerm, ...(kind === 'transfer' ? { transfer: true } : {}) });
    }
  }

  /**
   * A won pre-vote becomes an election. One won in the round that losing the
   * leader's connection started (fastPreVote) gets a short election timeout,
   * drawn from [1, fastRetryTicks]: that round's ranking compares logs as
   * each follower had them, and followers whose last appends differed
   * (one just restarted, one a batch behind) can each win a pre-vote, split
   * the real vote, and, with the ordinary timeout, leave the cell without a
   * leader for a whole election timeout after all (docs/benchmarks.md,
   * failover: 3 kills of 240). The short draw lets the next attempt, an
   * ordinary pre-vote, come within a few ticks, the two split candidates
   * most likely on different ticks. A timeout is liveness only: which node
   * may win a term is decided by the votes, as before.
   */
  private campaignAfterPreVote(): void {
    const fast = this.fastPreVote;
    this.startCampaign('election');
    if (fast && this.role === 'candidate') this.randomizedElectionTimeout = 1 + this.random.int(this.fastRetryTicks());
  }

  /** The most ticks a fast round's candidate waits before trying again: a third of the election timeout, at least one. */
  private fastRetryTicks(): number {
    return Math.max(1, Math.ceil(this.electionTimeout / 3));
  }

  private poll(from: NodeId, granted: boolean): 'won' | 'lost' | 'pending' {
    if (!this.votes.has(from)) this.votes.set(from, granted);
    let yes = 0;
    let no = 0;
    for (const id of this.voters) {
      const v = this.votes.get(id);
      if (v === true) yes++;
      else if (v === false) no++;
    }
    const quorum = Math.floor(this.voters.size / 2) + 1;
    if (yes >= quorum) return 'won';
    if (this.voters.size - no < quorum) return 'lost';
    return 'pending';
  }

  private handleVoteRequest(m: Message): void {
    if (m.type === MessageType.PreVote && m.term === this.term + 1 && this.handleFastPreVote(m)) return;
    const isPreVote = m.type === MessageType.PreVote;
    const responseType = isPreVote ? MessageType.PreVoteResponse : MessageType.RequestVoteResponse;
    // §5.2: "each server will vote for at most one candidate in a given term,
    // on a first-come-first-served basis". A follower that knows a leader
    // this term does not vote either.
    const canVote = this.vote === m.from || (this.vote === null && this.lead === null) || (isPreVote && m.term > this.term);
    // §5.4.1: "the voter denies its vote if its own log is more up-to-date than that of the candidate".
    if (canVote && this.log.isUpToDate(m.index ?? 0, m.logTerm ?? 0)) {
      this.send({ type: responseType, to: m.from, term: m.term, reject: false });
      if (!isPreVote) {
        this.electionElapsed = 0;
        this.vote = m.from;
        if (this.bug('voteBeforePersist')) this.hiddenVoteTerm = this.term;
      }
    } else {
      this.send({ type: responseType, to: m.from, reject: true });
    }
  }

  /**
   * Pre-votes for the round this node takes part in after losing its
   * leader's connection. Every follower of a crashed leader loses the
   * connection within a millisecond and starts a pre-vote; if each granted
   * every other's, each would win its pre-vote, turn candidate, vote for
   * itself and split the real vote, and the timer would decide after all.
   * So the round is ranked (ranksAhead): a fast pre-candidate grants a
   * claim ahead of its own and stands aside, remembering that claim; it
   * refuses one behind and sends that sender its own pre-vote (the sender
   * is campaigning, so it no longer holds a lease and will answer it; our
   * first pre-vote may have reached it while it still did). A node that
   * stood aside grants only claims at least as far ahead. Returns false
   * when the ordinary rules apply. A pre-vote changes no term and no vote,
   * so none of this bears on safety; it only decides who campaigns.
   */
  private handleFastPreVote(m: Message): boolean {
    const theirs: Claim = { id: m.from, lastTerm: m.logTerm ?? 0, lastIndex: m.index ?? 0 };
    const yielded = this.preVoteYield;
    if (this.role === 'follower' && yielded !== null) {
      const grant = !ranksAhead(yielded, theirs) && this.log.isUpToDate(theirs.lastIndex, theirs.lastTerm);
      this.send({ type: MessageType.PreVoteResponse, to: m.from, ...(grant ? { term: m.term, reject: false } : { reject: true }) });
      return true;
    }
    if (this.role !== 'pre-candidate' || !this.fastPreVote) return false;
    const ours: Claim = { id: this.id, lastTerm: this.log.lastTerm(), lastIndex: this.log.lastIndex() };
    if (ranksAhead(theirs, ours)) {
      this.send({ type: MessageType.PreVoteResponse, to: m.from, term: m.term, reject: false });
      this.becomeFollower(this.term, null);
      this.preVoteYield = theirs;
      return true;
    }
    this.send({ type: MessageType.PreVoteResponse, to: m.from, reject: true });
    this.send({
      type: MessageType.PreVote,
      to: m.from,
      term: Term(this.term + 1),
      index: LogIndex(ours.lastIndex),
      logTerm: Term(ours.lastTerm),
    });
    return true;
  }

  // ------------------------------------------------------------ followers

  private stepFollower(m: Message): void {
    switch (m.type) {
      case MessageType.AppendEntries:
        this.heardFromLeader(m.from);
        this.handleAppendEntries(m);
        return;
      case MessageType.Heartbeat:
        this.heardFromLeader(m.from);
        this.handleHeartbeat(m);
        return;
      case MessageType.InstallSnapshot:
        this.heardFromLeader(m.from);
        this.handleSnapshotChunk(m);
        return;
      case MessageType.TimeoutNow:
        // Leadership transfer: campaign at once, skipping the pre-vote, with the transfer flag that passes the lease check.
        this.startCampaign('transfer');
        return;
      default:
        return;
    }
  }

  private heardFromLeader(from: NodeId): void {
    this.electionElapsed = 0;
    this.lead = from;
  }

  private handleAppendEntries(m: Message): void {
    const index = m.index ?? 0;
    if (index < this.log.committed) {
      // Everything up to our commit index matches any leader's log: tell it so.
      this.send({ type: MessageType.AppendEntriesResponse, to: m.from, index: LogIndex(this.log.committed) });
      return;
    }
    const lastNew = this.log.maybeAppend(index, m.logTerm ?? 0, m.commit ?? 0, m.entries ?? []);
    if (lastNew !== undefined) {
      this.send({ type: MessageType.AppendEntriesResponse, to: m.from, index: LogIndex(lastNew) });
      return;
    }
    // §5.3: "If a follower's log is inconsistent with the leader's, the
    // AppendEntries consistency check will fail". The hint lets the leader
    // skip every entry of a conflicting term in one round trip.
    const [hintIndex, hintTerm] = this.log.findConflictByTerm(Math.min(index, this.log.lastIndex()), m.logTerm ?? 0);
    this.send({
      type: MessageType.AppendEntriesResponse,
      to: m.from,
      index: LogIndex(index),
      reject: true,
      rejectHint: LogIndex(hintIndex),
      rejectTerm: Term(hintTerm),
    });
  }

  private handleHeartbeat(m: Message): void {
    // The leader sends min(our match, its commit), so this never passes our
    // log unless our log was lost (a wiped disk) or the message is forged.
    // Then nothing is known to match: commit nothing and let the leader's
    // next append find where our logs agree.
    const commit = m.commit ?? 0;
    if (commit <= this.log.lastIndex()) this.log.commitTo(commit);
    this.send({ type: MessageType.HeartbeatResponse, to: m.from, ...(m.context !== undefined ? { context: m.context } : {}) });
  }

  /** §7 InstallSnapshot, in chunks: assemble them in order, then install and answer with where our log ends. */
  private handleSnapshotChunk(m: Message): void {
    const meta = m.snapshotMeta;
    const respond = (fields: Partial<Message>): void =>
      this.send({
        type: MessageType.InstallSnapshotResponse,
        to: m.from,
        ...(meta !== undefined ? { snapshotMeta: meta } : {}),
        ...fields,
      });
    const step = this.assembleSnapshot(m);
    switch (step.kind) {
      case 'reject':
        respond({ reject: true });
        return;
      case 'resume':
        respond({ snapshotOffset: step.offset });
        return;
      case 'complete': {
        const restored = this.restore(step.snapshot);
        respond({
          snapshotDone: true,
          snapshotOffset: step.snapshot.data.byteLength,
          index: LogIndex(restored ? this.log.lastIndex() : this.log.committed),
        });
        return;
      }
    }
  }

  /**
   * Adds one chunk to the transfer being received. Answers 'resume' with
   * the offset we expect next (after a good chunk, or for a lost,
   * duplicated or reordered one), 'reject' for a transfer that cannot
   * complete, and 'complete' once the last chunk filled the buffer.
   */
  private assembleSnapshot(m: Message): { kind: 'reject' } | { kind: 'resume'; offset: number } | { kind: 'complete'; snapshot: Snapshot } {
    const meta = m.snapshotMeta;
    const offset = m.snapshotOffset ?? 0;
    const total = m.snapshotTotalBytes ?? 0;
    const chunk = m.snapshotChunk ?? emptyData;
    if (meta === undefined || total > snapshotBytesMax || offset + chunk.byteLength > total) {
      this.snapshotReceive = null;
      return { kind: 'reject' };
    }
    let rx = this.snapshotReceive;
    const same =
      rx !== null && rx.from === m.from && rx.meta.index === meta.index && rx.meta.term === meta.term && rx.buffer.byteLength === total;
    if (!same || rx === null) {
      // A chunk of a transfer we do not hold (we restarted, or it was replaced): start over.
      if (offset !== 0) return { kind: 'resume', offset: 0 };
      rx = { from: m.from, meta, buffer: new Uint8Array(total), received: 0 };
      this.snapshotReceive = rx;
    }
    if (offset !== rx.received) return { kind: 'resume', offset: rx.received };
    rx.buffer.set(chunk, offset);
    rx.received += chunk.byteLength;
    if (m.snapshotDone !== true) return { kind: 'resume', offset: rx.received };
    this.snapshotReceive = null;
    if (rx.received !== total) return { kind: 'reject' };
    return { kind: 'complete', snapshot: { meta, data: rx.buffer } };
  }

  /** §7: install a snapshot from the leader. Returns false when our log already covers it. */
  private restore(snapshot: Snapshot): boolean {
    const { index, term } = snapshot.meta;
    if (index <= this.log.committed) return false;
    if (this.log.matchTerm(index, term)) {
      // "If the follower receives a snapshot that describes a prefix of its
      // log ... entries following the snapshot are still valid and must be retained."
      this.log.commitTo(index);
      return false;
    }
    const committedBefore = this.log.committed;
    this.log.restore(snapshot);
    this.conf.restore(index, snapshot.meta.conf, committedBefore);
    this.applyCurrentConf();
    return true;
  }

  // ----------------------------------------------------------- candidates

  private stepCandidate(m: Message): void {
    switch (m.type) {
      case MessageType.AppendEntries:
      case MessageType.Heartbeat:
      case MessageType.InstallSnapshot:
        // §5.2: "If the leader's term ... is at least as large as the candidate's
        // current term, then the candidate recognizes the leader as legitimate
        // and returns to follower state."
        this.becomeFollower(this.term, m.from);
        this.stepFollower(m);
        return;
      case MessageType.PreVoteResponse:
      case MessageType.RequestVoteResponse: {
        const expected = this.role === 'pre-candidate' ? MessageType.PreVoteResponse : MessageType.RequestVoteResponse;
        if (m.type !== expected) return;
        const outcome = this.poll(m.from, m.reject !== true);
        if (outcome === 'won') {
          if (this.role === 'pre-candidate') this.campaignAfterPreVote();
          else this.becomeLeader();
        } else if (outcome === 'lost') {
          this.becomeFollower(this.term, null);
        }
        return;
      }
      default:
        return;
    }
  }

  // --------------------------------------------------------------- leader

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    this.ticksSinceWork++;
    if (this.electionElapsed >= this.electionTimeout) {
      this.electionElapsed = 0;
      if (this.config.checkQuorum) {
        // Dissertation §6.2: a leader that has not heard from a majority in an
        // election timeout steps down, so clients retry elsewhere.
        if (!this.quorumActive()) {
          this.becomeFollower(this.term, null);
          return;
        }
        for (const [id, pr] of this.progress) if (id !== this.id) pr.recentActive = false;
      }
      if (this.leadTransferee !== null) this.abortLeaderTransfer();
    }
    for (const [id, pr] of this.progress) {
      if (pr.state !== 'snapshot' || pr.transfer === null) continue;
      pr.transfer.stallTicks++;
      if (pr.transfer.stallTicks >= this.electionTimeout) this.sendSnapshotChunk(id, pr);
    }
    if (this.heartbeatElapsed >= this.heartbeatInterval()) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat(undefined);
    }
  }

  /** heartbeatTicks while the group works; idleHeartbeatTicks once nothing was appended or read for an election timeout. */
  private heartbeatInterval(): number {
    return this.ticksSinceWork >= this.electionTimeout ? this.idleHeartbeatTimeout : this.heartbeatTimeout;
  }

  private quorumActive(): boolean {
    let active = 0;
    for (const id of this.voters) {
      if (id === this.id || this.progress.get(id)?.recentActive === true) active++;
    }
    return active >= Math.floor(this.voters.size / 2) + 1;
  }

  private stepLeader(m: Message): void {
    const pr = this.progress.get(m.from);
    if (pr === undefined) return;
    switch (m.type) {
      case MessageType.AppendEntriesResponse:
        pr.recentActive = true;
        this.handleAppendResponse(m.from, pr, m);
        return;
      case MessageType.HeartbeatResponse:
        pr.recentActive = true;
        pr.probeSent = false;
        // A full window may be full of lost appends: let one more through.
        if (pr.state === 'replicate' && pr.inflights.full()) pr.inflights.freeFirstOne();
        if (pr.match < this.log.lastIndex()) this.maybeSendAppend(m.from, true);
        if (m.context !== undefined) this.ackRead(m.from, m.context);
        return;
      case MessageType.InstallSnapshotResponse:
        pr.recentActive = true;
        this.handleSnapshotResponse(m.from, pr, m);
        return;
      default:
        return;
    }
  }

  private handleAppendResponse(from: NodeId, pr: Progress, m: Message): void {
    const index = m.index ?? 0;
    if (index > this.log.lastIndex()) return;
    if (m.reject === true) {
      let nextProbe = m.rejectHint ?? 0;
      const rejectTerm = m.rejectTerm ?? 0;
      if (rejectTerm > 0) [nextProbe] = this.log.findConflictByTerm(nextProbe, rejectTerm);
      if (pr.maybeDecrTo(index, nextProbe)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.maybeSendAppend(from, true);
      }
      return;
    }
    if (!pr.maybeUpdate(index) && !(pr.state === 'probe' && pr.match === index)) return;
    switch (pr.state) {
      case 'probe':
        pr.becomeReplicate();
        break;
      case 'snapshot':
        if (pr.match + 1 >= this.log.firstIndex()) {
          pr.becomeProbe();
          pr.becomeReplicate();
        }
        break;
      case 'replicate':
        pr.inflights.freeLE(index);
        break;
    }
    if (this.maybeCommit()) this.onCommitAdvanced();
    if (this.role !== 'leader') return;
    while (this.maybeSendAppend(from, false)) {
      // Pipelining: fill the window (a paused probe or a full window just opened).
    }
    if (from === this.leadTransferee && pr.match === this.log.lastIndex()) this.sendTimeoutNow(from);
  }

  private handleSnapshotResponse(from: NodeId, pr: Progress, m: Message): void {
    const t = pr.transfer;
    if (pr.state !== 'snapshot' || t === null) return;
    if (m.snapshotMeta !== undefined && m.snapshotMeta.index !== t.snapshot.meta.index) return;
    if (m.reject === true) {
      pr.becomeProbe();
      return;
    }
    if (m.snapshotDone !== true) {
      const offset = m.snapshotOffset ?? 0;
      // Equal offsets are duplicates: resending on them could ping-pong forever
      // under duplication; a lost chunk is resent by the stall timer instead.
      if (offset === t.ackedOffset || offset > t.snapshot.data.byteLength) return;
      t.ackedOffset = offset;
      this.sendSnapshotChunk(from, pr);
      return;
    }
    // The follower installed the snapshot (or already had its entries): its log matches ours up to m.index.
    const index = m.index ?? 0;
    if (index > this.log.lastIndex()) return;
    pr.maybeUpdate(index);
    pr.becomeProbe();
    if (pr.match + 1 >= this.log.firstIndex()) pr.becomeReplicate();
    if (this.maybeCommit()) this.onCommitAdvanced();
    if (this.role !== 'leader') return;
    while (this.maybeSendAppend(from, false)) {
      // Catch up from the snapshot on.
    }
  }

  private sendSnapshotChunk(to: NodeId, pr: Progress): void {
    const t = pr.transfer;
    assert(t !== null && pr.state === 'snapshot', 'snapshot chunks go only to a follower in snapshot state');
    const data = t.snapshot.data;
    const start = t.ackedOffset;
    const end = Math.min(data.byteLength, start + this.config.snapshotChunkBytes);
    assert(start <= end, 'snapshot chunk bounds');
    this.send({
      type: MessageType.InstallSnapshot,
      to,
      snapshotMeta: t.snapshot.meta,
      snapshotChunk: data.subarray(start, end),
      snapshotOffset: start,
      snapshotTotalBytes: data.byteLength,
      snapshotDone: end === data.byteLength,
    });
    t.stallTicks = 0;
  }

  /** §7: the follower needs entries we discarded; send the snapshot instead. */
  private sendSnapshot(to: NodeId, pr: Progress): boolean {
    // A follower we have not heard from lately may be down: do not start a large transfer.
    if (!pr.recentActive) return false;
    const snapshot = this.log.snapshot();
    if (snapshot.meta.index === 0) return false;
    pr.becomeSnapshot(snapshot.meta.index);
    pr.transfer = { snapshot, ackedOffset: 0, stallTicks: 0 };
    this.sendSnapshotChunk(to, pr);
    return true;
  }

  /**
   * Sends the next append to `to` if its flow control allows: entries from
   * its next index, at most maxEntriesPerMsg / maxBytesPerMsg. With
   * sendIfEmpty it sends even without entries (to carry the commit index or
   * to probe). Returns whether a message went out.
   */
  private maybeSendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.progress.get(to);
    if (pr === undefined || to === this.id || pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    const prevTerm = this.log.term(prevIndex);
    const ents =
      prevTerm === undefined ? undefined : this.log.entriesFrom(pr.next, this.config.maxBytesPerMsg, this.config.maxEntriesPerMsg);
    if (ents !== undefined && ents.length === 0 && !sendIfEmpty) return false;
    if (prevTerm === undefined || ents === undefined) return this.sendSnapshot(to, pr);
    this.send({
      type: MessageType.AppendEntries,
      to,
      index: LogIndex(prevIndex),
      logTerm: Term(prevTerm),
      entries: ents,
      commit: LogIndex(this.log.committed),
    });
    pr.sentCommit = Math.max(pr.sentCommit, this.log.committed);
    if (pr.state === 'probe') {
      pr.probeSent = true;
    } else if (ents.length > 0) {
      const last = (ents[ents.length - 1] as Entry).index;
      pr.optimisticUpdate(last);
      pr.inflights.add(last);
    }
    return true;
  }

  /** Sends new entries to every follower, and the commit index too when it is news and `withCommit` (see RaftConfig.broadcastCommit). */
  private bcastAppend(withCommit = this.config.broadcastCommit): void {
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      while (this.maybeSendAppend(id, withCommit && pr.sentCommit < this.log.committed)) {
        // Pipelining: as many batches as the window allows.
      }
    }
  }

  private bcastHeartbeat(context: string | undefined): void {
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      this.send({
        type: MessageType.Heartbeat,
        to: id,
        // Never past what the follower holds: it may lack entries we committed.
        commit: LogIndex(Math.min(pr.match, this.log.committed)),
        ...(context !== undefined ? { context } : {}),
      });
    }
  }

  private sendTimeoutNow(to: NodeId): void {
    this.send({ type: MessageType.TimeoutNow, to });
  }

  private abortLeaderTransfer(): void {
    this.leadTransferee = null;
  }

  private canAcceptProposal(): boolean {
    // Dissertation §3.10: during a transfer the leader stops accepting client requests.
    if (this.role !== 'leader' || this.leadTransferee !== null) return false;
    return this.log.lastIndex() - this.log.committed < uncommittedEntriesMax;
  }

  private appendEntry(type: EntryType, data: Uint8Array): number {
    assert(this.role === 'leader', 'only the leader appends new entries');
    const index = this.log.lastIndex() + 1;
    this.log.append([{ term: Term(this.term), index: LogIndex(index), type, data }]);
    this.needBcast = true;
    this.ticksSinceWork = 0;
    return index;
  }

  /**
   * §5.3/§5.4.2: the highest index on a majority of voters becomes committed,
   * but only if its entry is of the current term ("Raft never commits log
   * entries from previous terms by counting replicas").
   */
  private maybeCommit(): boolean {
    // The voters' match indexes, highest first, by insertion into a reused array: this runs on
    // every append answer, and a handful of voters needs neither a sort nor a new array.
    const matches = this.matchScratch;
    let n = 0;
    for (const id of this.voters) {
      const match = this.progress.get(id)?.match ?? 0;
      let at = n++;
      while (at > 0 && (matches[at - 1] as number) < match) {
        matches[at] = matches[at - 1] as number;
        at--;
      }
      matches[at] = match;
    }
    if (n === 0) return false;
    const quorumIndex = matches[Math.floor(n / 2)] as number;
    if (quorumIndex <= this.log.committed) return false;
    if (this.log.term(quorumIndex) !== this.term && !this.bug('commitPreviousTermByCounting')) return false;
    this.log.commitTo(quorumIndex);
    return true;
  }

  private onCommitAdvanced(): void {
    this.needBcast = true;
    if (this.committedEntryInCurrentTerm() && this.reads.awaitingBlank.length > 0) {
      const waiting = this.reads.awaitingBlank;
      this.reads.awaitingBlank = [];
      this.reads.queued -= waiting.length;
      for (const ctx of waiting) this.joinRead(ctx);
    }
    // Dissertation §4.2.2: a leader removed from the configuration steps down
    // once the entry that removed it is committed. It first tells the others
    // the new commit index, so the change commits on them promptly.
    if (!this.voters.has(this.id) && this.log.committed >= this.conf.currentIndex()) {
      this.needBcast = false;
      this.bcastAppend(true);
      this.flush();
      this.becomeFollower(this.term, null);
    }
  }

  private committedEntryInCurrentTerm(): boolean {
    return this.log.term(this.log.committed) === this.term;
  }

  private joinRead(requestCtx: string): void {
    this.ticksSinceWork = 0;
    if (this.voters.size === 1 && this.voters.has(this.id)) {
      // A single voter is its own majority: no round trip confirms anything more.
      this.readStates.push({ index: LogIndex(this.log.committed), requestCtx });
      return;
    }
    this.reads.join(requestCtx, this.log.committed, this.id);
  }

  private ackRead(from: NodeId, context: string): void {
    const released = this.reads.ack(from, context, (acks) => {
      let n = 0;
      for (const id of this.voters) if (acks.has(id)) n++;
      return n >= Math.floor(this.voters.size / 2) + 1;
    });
    for (const round of released) {
      for (const requestCtx of round.requestCtxs) this.readStates.push({ index: LogIndex(round.index), requestCtx });
    }
  }

  // ----------------------------------------------------------- membership

  private onLogAppend(ents: readonly Entry[]): void {
    const before = this.conf.currentIndex();
    this.conf.onAppend(ents);
    const touchesConf = ents.some((e) => e.type === EntryType.ConfChange) || this.conf.currentIndex() !== before;
    if (touchesConf) this.applyCurrentConf();
  }

  /** Makes the latest configuration in the log (or snapshot) the one in force. */
  private applyCurrentConf(): void {
    const conf = this.conf.current();
    this.voters = new Set(conf.voters);
    this.learners = new Set(conf.learners);
    assert(![...this.learners].some((l) => this.voters.has(l)), 'a node is a voter or a learner, not both');
    if (this.role !== 'leader') return;
    for (const id of this.members()) {
      if (this.progress.has(id)) continue;
      const pr = new Progress(this.log.lastIndex() + 1, this.config.maxInflightMsgs);
      pr.recentActive = true;
      this.progress.set(id, pr);
    }
    for (const id of [...this.progress.keys()]) {
      if (this.voters.has(id) || this.learners.has(id)) continue;
      this.progress.delete(id);
      if (id === this.leadTransferee) this.abortLeaderTransfer();
    }
    // The quorum may have changed (a removed voter no longer holds commits back).
    if (this.maybeCommit()) this.onCommitAdvanced();
  }

  private scanConfChanges(lo: number, last: number): void {
    const storage = this.config.storage;
    while (lo <= last) {
      const ents = storage.entries(LogIndex(lo), LogIndex(last + 1), startupScanBytes);
      assert(ents.length > 0, `storage returned no entries at ${lo}`);
      this.conf.onAppend(ents.filter((e) => e.type === EntryType.ConfChange));
      lo = (ents[ents.length - 1] as Entry).index + 1;
    }
  }

  /**
   * A fresh cluster: every node given the same peers writes the same
   * membership entries at term 1 and treats them as committed. Keeping the
   * initial membership in the log (not only in config) lets a node that
   * joins later learn it by replication.
   */
  private bootstrap(peers: readonly NodeId[], learners: readonly NodeId[]): void {
    const changes: ConfChange[] = [
      ...[...peers].sort().map((node) => ({ type: ConfChangeType.AddVoter, node })),
      ...[...learners].sort().map((node) => ({ type: ConfChangeType.AddLearner, node })),
    ];
    const ents: Entry[] = changes.map((c, i) => ({
      term: Term(1),
      index: LogIndex(i + 1),
      type: EntryType.ConfChange,
      data: encodeConfChange(c),
    }));
    this.term = 1;
    this.vote = null;
    this.log.append(ents);
    this.log.commitTo(ents.length);
  }

  // ----------------------------------------------------------------- misc

  private send(fields: Partial<Message> & Pick<Message, 'type' | 'to'>): void {
    assert(fields.to !== this.id, 'a node never sends itself messages');
    this.msgs.push({ from: this.id, term: Term(this.term), ...fields });
  }

  private bug(name: RaftBug): boolean {
    return this.bugs[name] === true;
  }
}
