/**
 * The RaftNode the caller drives (etcd's RawNode): it wraps the state
 * machine in raft.ts and hands out its output as Ready batches.
 *
 * Contract: ready() and advance() alternate. Between them the caller
 * persists ready.hardState, ready.entries and ready.snapshot (fsync), then
 * sends ready.messages, then installs the snapshot and applies
 * ready.committedEntries, then calls advance(). tick(), step() and the
 * propose family may be called in between (while the fsync runs); their
 * output goes into the next Ready. hasReady() is false while a Ready is out.
 */
import { assert, LogIndex } from '@fencer/base';
import type { NodeId } from '@fencer/base';
import type { Message, RaftConfig, RaftNode, Ready, SoftState, Status } from './api.js';
import type { ConfChange, ConfState, Entry, HardState } from './types.js';
import { Raft } from './raft.js';
import { committedBytesPerReadyMax } from './limits.js';
import type { DropReason } from './message-check.js';

/** What one Ready handed out, to be marked persisted/applied by advance(). */
interface ReadyInFlight {
  readonly lastEntry: { index: number; term: number } | undefined;
  readonly snapshotIndex: number | undefined;
  readonly appliedTo: number | undefined;
}

class RawNode implements RaftNode {
  private readonly raft: Raft;
  private prevSoft: SoftState;
  private prevHard: HardState;
  private inFlight: ReadyInFlight | null = null;

  constructor(config: RaftConfig) {
    const hardStateAtStart = config.storage.initialState().hardState;
    this.raft = new Raft(config);
    this.prevSoft = this.raft.softState();
    // The stored hard state is what is durable; a bootstrap changes it and so produces a first Ready.
    this.prevHard = hardStateAtStart;
  }

  tick(): void {
    this.raft.tick();
  }

  step(message: Message): DropReason | null {
    return this.raft.step(message);
  }

  propose(data: Uint8Array): LogIndex | null {
    return this.raft.propose(data);
  }

  proposeConfChange(change: ConfChange): LogIndex | null {
    return this.raft.proposeConfChange(change);
  }

  readIndex(requestCtx: string): boolean {
    return this.raft.readIndex(requestCtx);
  }

  transferLeadership(to: NodeId): void {
    this.raft.transferLeadership(to);
  }

  campaign(): void {
    this.raft.campaign();
  }

  hasReady(): boolean {
    if (this.inFlight !== null) return false;
    const r = this.raft;
    const soft = r.softState();
    if (soft.leader !== this.prevSoft.leader || soft.role !== this.prevSoft.role) return true;
    if (!hardStatesEqual(r.hardState(), this.prevHard)) return true;
    const unstable = r.log.unstable;
    if (unstable.entries.length > 0 || unstable.snapshot !== undefined) return true;
    if (r.msgs.length > 0 || r.readStates.length > 0) return true;
    if (r.hasPendingFlush()) return true;
    return r.log.hasNextCommittedEntries();
  }

  ready(): Ready {
    assert(this.inFlight === null, 'ready() called again before advance()');
    const r = this.raft;
    r.flush();
    const soft = r.softState();
    const softChanged = soft.leader !== this.prevSoft.leader || soft.role !== this.prevSoft.role;
    const hard = r.hardState();
    const hardChanged = !hardStatesEqual(hard, this.prevHard);
    const unstable = r.log.unstable;
    const entries = unstable.entries.slice();
    const snapshot = unstable.snapshot;
    const committedEntries = r.log.nextCommittedEntries(committedBytesPerReadyMax);
    const messages = r.msgs;
    r.msgs = [];
    const readStates = r.readStates;
    r.readStates = [];

    if (snapshot !== undefined && entries.length > 0) {
      assert((entries[0] as Entry).index === snapshot.meta.index + 1, 'entries after a snapshot start right above it');
    }
    const last = entries[entries.length - 1];
    this.inFlight = {
      lastEntry: last === undefined ? undefined : { index: last.index, term: last.term },
      snapshotIndex: snapshot?.meta.index,
      appliedTo: committedEntries.length > 0 ? (committedEntries[committedEntries.length - 1] as Entry).index : undefined,
    };
    if (softChanged) this.prevSoft = soft;
    if (hardChanged) this.prevHard = hard;
    // One object shape for every Ready (absent parts are undefined), so the code that reads them stays monomorphic.
    return {
      softState: softChanged ? soft : undefined,
      hardState: hardChanged ? r.hardStateToPersist() : undefined,
      entries,
      snapshot,
      messages,
      committedEntries,
      readStates,
    };
  }

  advance(): void {
    const done = this.inFlight;
    assert(done !== null, 'advance() without a ready()');
    this.inFlight = null;
    const log = this.raft.log;
    if (done.snapshotIndex !== undefined) {
      log.stableSnapTo(done.snapshotIndex);
      log.appliedTo(done.snapshotIndex);
    }
    if (done.lastEntry !== undefined) log.stableTo(done.lastEntry.index, done.lastEntry.term);
    if (done.appliedTo !== undefined) log.appliedTo(Math.max(done.appliedTo, log.applied));
    this.raft.onPersisted();
  }

  reportUnreachable(id: NodeId): void {
    this.raft.reportUnreachable(id);
  }

  reportConnectionLost(id: NodeId): void {
    this.raft.reportConnectionLost(id);
  }

  status(): Status {
    const r = this.raft;
    const conf = r.conf.current();
    let progress: Record<string, { match: LogIndex; next: LogIndex; state: 'probe' | 'replicate' | 'snapshot' }> | undefined;
    if (r.role === 'leader') {
      progress = {};
      for (const [id, pr] of r.progress) progress[id] = { match: LogIndex(pr.match), next: LogIndex(pr.next), state: pr.state };
    }
    return {
      id: r.id,
      role: r.role,
      term: r.hardState().term,
      leader: r.lead,
      commit: LogIndex(r.log.committed),
      applied: LogIndex(r.log.applied),
      lastIndex: LogIndex(r.log.lastIndex()),
      voters: conf.voters,
      learners: conf.learners,
      progress,
    };
  }

  confStateAt(index: LogIndex): ConfState {
    return this.raft.confStateAt(index);
  }
}

function hardStatesEqual(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

/** Builds a node from storage (recovering its state) or, on empty storage with peers, bootstraps a new cluster. */
export function createRaftNode(config: RaftConfig): RaftNode {
  return new RawNode(config);
}
