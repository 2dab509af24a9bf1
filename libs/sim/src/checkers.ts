/**
 * The simulator's safety and liveness checkers. They see the run through
 * observation points (stores' saves and their completions, state machine
 * applies, role changes, client acknowledgements and reads) and record a
 * violation the moment a property breaks, with the virtual time and a
 * detail a person can act on.
 *
 * Properties (Raft paper Figure 3, plus our client promises):
 * - election safety: at most one leader per term;
 * - log matching: two logs with an entry of the same index and term hold the
 *   same entry there and the same entries before it;
 * - leader completeness: a leader's log holds every entry committed before it;
 * - state machine safety: every replica applies (and commits) the same entry at an index;
 * - a replica's commit index never goes backwards, across restarts too;
 * - no acknowledged proposal is lost;
 * - a ReadIndex read reflects every write acknowledged before it began;
 * - with the lock state machine, the lock checkers (lock-checkers.ts):
 *   fencing tokens, exclusion, and read content;
 * - after the faults stop: a leader within a bound, and all members converge.
 */
import { type NodeId, assert } from '@fencer/base';
import type { Entry, HardState, RaftStorage } from '@fencer/raft';
import { digest } from './hash.js';
import { KV_KEYS } from './kv.js';

export type CheckerName =
  | 'election-safety'
  | 'log-matching'
  | 'leader-completeness'
  | 'state-machine-safety'
  | 'commit-monotonic'
  | 'acked-lost'
  | 'stale-read'
  /** Acknowledged grants of one name: tokens strictly increase in log order (lock-checkers.ts). */
  | 'fencing-token'
  /** Acknowledged grants of one name, either exclusive, never overlap in log order (lock-checkers.ts). */
  | 'lock-exclusion'
  /** No session expires before the TTL of a heartbeat it was told was acknowledged (lock-checkers.ts). */
  | 'early-expiry'
  /** A spurious connection reset in a calm cell was followed by a real election (connection-resets.ts). */
  | 'leader-disrupted'
  | 'no-leader-after-faults'
  | 'no-convergence'
  | 'no-progress-after-faults'
  /** The code under test threw (an assertion): the node crashed, as the process would exit. */
  | 'replica-assertion'
  /** A store refused to open after a crash: recovery must always work on a disk that only lost unsynced data. */
  | 'store-open-failed'
  /** The simulator itself threw outside any node. */
  | 'sim-error';

/** The checkers of Raft's safety properties and our client promises (liveness and crashes excluded). */
export const SAFETY_CHECKERS: readonly CheckerName[] = [
  'election-safety',
  'log-matching',
  'leader-completeness',
  'state-machine-safety',
  'commit-monotonic',
  'acked-lost',
  'stale-read',
  'fencing-token',
  'lock-exclusion',
  'early-expiry',
];

/**
 * Checkers of promises about availability rather than safety: a bug that
 * only disrupts (a needless election) is caught by these.
 */
export const DISRUPTION_CHECKERS: readonly CheckerName[] = ['leader-disrupted'];

export interface Violation {
  readonly checker: CheckerName;
  readonly timeUs: number;
  readonly detail: string;
}

interface Applied {
  readonly term: number;
  readonly digest: string;
  readonly node: NodeId;
  readonly how: 'applied' | 'committed';
  /** Earliest term in which a replica's commit index covered it (Infinity when only seen applied). */
  commitTerm: number;
}

interface LogPoint {
  readonly digest: string;
  /** Term of the entry before it in the log that first held it (-1 when unknown, after a snapshot). */
  readonly prevTerm: number;
  readonly node: NodeId;
}

export interface AckedWrite {
  readonly writeId: number;
  /** The KV register written (the KV machine's reads check it); absent for lock commands. */
  readonly key?: number;
  readonly index: number;
  readonly term: number;
  readonly digest: string;
  readonly ackUs: number;
}

/** What a read must reflect: captured when it begins. */
export interface ReadBarrier {
  readonly startUs: number;
  /** Highest index of any write acknowledged before the read began. */
  readonly ackedIndexMax: number;
  /** Per key: index of the latest acknowledged write to it. */
  readonly ackedIndexByKey: readonly number[];
}

/** Violations beyond this many are counted but not kept (a broken run would otherwise fill memory). */
const violationsKeptMax = 50;

export class Checkers {
  readonly violations: Violation[] = [];
  violationCount = 0;
  private readonly leaderOfTerm = new Map<number, NodeId>();
  /** Committed entries as first applied or committed anywhere: index → (term, digest). */
  private readonly applied = new Map<number, Applied>();
  private appliedIndexMax = 0;
  /** Every (index, term) ever written to any log. */
  /** Keyed by index * 2^20 + term (terms stay far below 2^20 in a run). */
  private readonly logPoints = new Map<number, LogPoint>();
  /** Per node: commit index in the last hard state saved in this life, and the last one known durable. */
  private readonly commitSaved = new Map<NodeId, number>();
  private readonly commitDurable = new Map<NodeId, number>();
  /** The commit index each node knows in memory, sampled within its current life. */
  private readonly commitInMemory = new Map<NodeId, number>();
  readonly acked: AckedWrite[] = [];
  private ackedIndexMax = 0;
  private readonly ackedIndexByKey = new Array<number>(KV_KEYS).fill(0);
  readsChecked = 0;
  electionsSeen = 0;

  constructor(private readonly now: () => number) {}

  /** Violations that are assertions of the code under test (a run goes on after those). */
  assertionCount = 0;

  fail(checker: CheckerName, detail: string): void {
    this.violationCount++;
    if (checker === 'replica-assertion') this.assertionCount++;
    if (this.violations.length < violationsKeptMax) this.violations.push({ checker, timeUs: this.now(), detail });
  }

  // ---- elections ----

  /** A node became leader of `term`; its log is `log` at that moment. */
  becameLeader(node: NodeId, term: number, log: RaftStorage): void {
    this.electionsSeen++;
    const other = this.leaderOfTerm.get(term);
    if (other !== undefined && other !== node) {
      this.twoLeaders(term, node, other);
    } else {
      this.leaderOfTerm.set(term, node);
    }
    this.checkLeaderCompleteness(node, term, log);
  }

  /** `node` sent a message only a leader sends, in `term`. Catches a leadership no role change reported. */
  leaderMessage(node: NodeId, term: number): void {
    const other = this.leaderOfTerm.get(term);
    if (other === undefined) this.leaderOfTerm.set(term, node);
    else if (other !== node) this.twoLeaders(term, node, other);
  }

  private readonly termsWithTwoLeaders = new Set<number>();

  private twoLeaders(term: number, a: NodeId, b: NodeId): void {
    if (this.termsWithTwoLeaders.has(term)) return; // Once per term is enough.
    this.termsWithTwoLeaders.add(term);
    this.fail('election-safety', `${a} and ${b} are both leaders of term ${term}`);
  }

  /**
   * Leader completeness (§5.4): an entry committed in term t is in the log of
   * every leader of a term above t. "Committed in term t" is the earliest
   * term in which any replica's commit index covered it, so a leader observed
   * late (its ready was in flight) is held only to what was committed before
   * its term.
   */
  private checkLeaderCompleteness(node: NodeId, term: number, log: RaftStorage): void {
    const first = log.firstIndex();
    const last = log.lastIndex();
    for (const [i, a] of this.applied) {
      if (a.commitTerm >= term || i < first) continue;
      const t = i <= last ? log.term(i as never) : -1;
      if (t !== a.term) {
        this.fail(
          'leader-completeness',
          i <= last
            ? `${node} leads term ${term} with term ${t} at ${i}, but (${i}, ${a.term}) was committed in term ${a.commitTerm}`
            : `${node} leads term ${term} with last index ${last}, but (${i}, ${a.term}) was committed in term ${a.commitTerm}`,
        );
        return;
      }
    }
  }

  // ---- logs, as written through the store ----

  /**
   * A store accepted `entries` (and maybe a hard state) for `node`. The
   * read view `log` already reflects them.
   */
  saved(node: NodeId, hardState: HardState | undefined, entries: readonly Entry[], log: RaftStorage): void {
    if (entries.length > 0) {
      const firstIndex = (entries[0] as Entry).index;
      let prevTerm = -1;
      if (firstIndex - 1 >= log.firstIndex() - 1 && firstIndex - 1 >= 0) {
        prevTerm = firstIndex - 1 === 0 ? 0 : log.term((firstIndex - 1) as never);
      }
      for (const e of entries) {
        this.logPoint(node, e.index, e.term, digest(e.type, e.data), prevTerm);
        prevTerm = e.term;
      }
    }
    if (hardState !== undefined) {
      const before = this.commitSaved.get(node) ?? 0;
      if (hardState.commit < before) {
        this.fail('commit-monotonic', `${node} saved commit ${hardState.commit} after ${before}`);
      }
      this.commitSaved.set(node, Math.max(before, hardState.commit));
      if (hardState.commit > before) this.newlyCommitted(node, before, hardState.commit, hardState.term, log);
    }
  }

  /**
   * A replica's commit index says its entries up to it are committed (Raft
   * guarantees that of every server, leader or follower), so every replica's
   * claim must agree with every other's, before anything is applied.
   */
  private newlyCommitted(node: NodeId, before: number, commit: number, term: number, log: RaftStorage): void {
    const lo = Math.max(before + 1, log.firstIndex());
    const hi = Math.min(commit, log.lastIndex());
    if (lo > hi) return;
    for (const e of log.entries(lo as never, (hi + 1) as never, Number.MAX_SAFE_INTEGER)) {
      this.committedEntry(node, e.index, e.term, digest(e.type, e.data), 'committed', term);
    }
  }

  private logPoint(node: NodeId, index: number, term: number, d: string, prevTerm: number): void {
    const key = index * 0x10_0000 + term;
    const seen = this.logPoints.get(key);
    if (seen === undefined) {
      assert(term < 0x10_0000, 'term fits the log point key');
      this.logPoints.set(key, { digest: d, prevTerm, node });
      return;
    }
    if (seen.digest !== d) {
      this.fail('log-matching', `(${index}, ${term}) holds different entries on ${seen.node} and ${node}`);
    } else if (seen.prevTerm >= 0 && prevTerm >= 0 && seen.prevTerm !== prevTerm) {
      this.fail('log-matching', `(${index}, ${term}) follows term ${seen.prevTerm} on ${seen.node} but ${prevTerm} on ${node}`);
    }
  }

  /** A hard state of `node` is durable (its save completed). */
  durable(node: NodeId, hardState: HardState): void {
    this.commitDurable.set(node, Math.max(this.commitDurable.get(node) ?? 0, hardState.commit));
  }

  /**
   * `node` restarted and recovered `hardState` from its disk. Across a
   * restart the commit index checked is the durable one: a commit-only
   * change is not synced on its own (etcd's MustSync), so a replica may come
   * back below the commit it knew in memory, but never below one that was on
   * its disk.
   */
  recovered(node: NodeId, hardState: HardState, snapshotIndex: number): void {
    const durable = this.commitDurable.get(node) ?? 0;
    const recovered = Math.max(hardState.commit, snapshotIndex);
    if (recovered < durable) this.fail('commit-monotonic', `${node} recovered commit ${recovered} after a durable ${durable}`);
    this.commitSaved.set(node, hardState.commit);
    this.commitInMemory.set(node, recovered);
  }

  /** Within one life of `node`, its in-memory commit index (sampled on every tick) never goes backwards. */
  commitObserved(node: NodeId, commit: number): void {
    const before = this.commitInMemory.get(node) ?? 0;
    if (commit < before) this.fail('commit-monotonic', `${node}'s commit index went from ${before} to ${commit} within one life`);
    this.commitInMemory.set(node, Math.max(before, commit));
  }

  /** `node` was removed for good (its disk is gone): forget its durable state. */
  forget(node: NodeId): void {
    this.commitSaved.delete(node);
    this.commitDurable.delete(node);
    this.commitInMemory.delete(node);
  }

  // ---- applies ----

  appliedEntry(node: NodeId, index: number, term: number, d: string): void {
    this.committedEntry(node, index, term, d, 'applied', Number.POSITIVE_INFINITY);
  }

  private committedEntry(node: NodeId, index: number, term: number, d: string, how: 'applied' | 'committed', commitTerm: number): void {
    const seen = this.applied.get(index);
    if (seen === undefined) {
      this.applied.set(index, { term, digest: d, node, how, commitTerm });
      if (index > this.appliedIndexMax) this.appliedIndexMax = index;
      return;
    }
    if (commitTerm < seen.commitTerm) seen.commitTerm = commitTerm;
    if (seen.term !== term || seen.digest !== d) {
      this.fail(
        'state-machine-safety',
        `${node} ${how} (${index}, term ${term}) but ${seen.node} ${seen.how} (${index}, term ${seen.term})`,
      );
    }
  }

  get committedIndexMax(): number {
    return this.appliedIndexMax;
  }

  committedAt(index: number): { term: number; digest: string } | undefined {
    return this.applied.get(index);
  }

  // ---- clients ----

  ackedWrite(w: AckedWrite): void {
    this.acked.push(w);
    const a = this.applied.get(w.index);
    if (a === undefined || a.term !== w.term || a.digest !== w.digest) {
      this.fail('acked-lost', `write ${w.writeId} acked at (${w.index}, ${w.term}) but that is not what was applied there`);
    }
    if (w.index > this.ackedIndexMax) this.ackedIndexMax = w.index;
    if (w.key !== undefined && w.index > (this.ackedIndexByKey[w.key] as number)) this.ackedIndexByKey[w.key] = w.index;
  }

  readBarrier(): ReadBarrier {
    return { startUs: this.now(), ackedIndexMax: this.ackedIndexMax, ackedIndexByKey: [...this.ackedIndexByKey] };
  }

  /** A read served by `node` saw the state machine at `appliedIndex`, and `version` as key's last write index. */
  readServed(node: NodeId, barrier: ReadBarrier, key: number, appliedIndex: number, version: number): void {
    this.readsChecked++;
    if (appliedIndex < barrier.ackedIndexMax) {
      this.fail('stale-read', `${node} served a read at applied ${appliedIndex}, begun after a write acked at ${barrier.ackedIndexMax}`);
      return;
    }
    const need = barrier.ackedIndexByKey[key] as number;
    if (version < need)
      this.fail('stale-read', `${node} read key ${key} at version ${version}, begun after a write to it acked at ${need}`);
  }

  // ---- end of run ----

  /** Every acknowledged write is in the final committed log: `logs` are the final members' read views. */
  finalAcks(logs: readonly { node: NodeId; log: RaftStorage; applied: number }[]): void {
    for (const w of this.acked) {
      const a = this.applied.get(w.index);
      if (a === undefined || a.term !== w.term || a.digest !== w.digest) {
        this.fail('acked-lost', `write ${w.writeId} acked at (${w.index}, ${w.term}) is not in the committed log`);
        continue;
      }
      for (const { node, log, applied } of logs) {
        if (applied < w.index) {
          this.fail('acked-lost', `${node} ended at applied ${applied}, below the acked write ${w.writeId} at ${w.index}`);
        } else if (w.index >= log.firstIndex() && w.index <= log.lastIndex() && log.term(w.index as never) !== w.term) {
          this.fail(
            'acked-lost',
            `${node} ends with term ${log.term(w.index as never)} at ${w.index}, where write ${w.writeId} was acked in ${w.term}`,
          );
        }
      }
    }
  }

  /** Pairwise log matching over the final logs (the incremental check sees every write; this re-reads what is on disk). */
  finalLogs(logs: readonly { node: NodeId; log: RaftStorage }[]): void {
    for (const { node, log } of logs) {
      const first = log.firstIndex();
      const last = log.lastIndex();
      if (last < first) continue;
      let prevTerm = first - 1 === 0 ? 0 : log.term((first - 1) as never);
      for (const e of log.entries(first, (last + 1) as never, Number.MAX_SAFE_INTEGER)) {
        this.logPoint(node, e.index, e.term, digest(e.type, e.data), prevTerm);
        prevTerm = e.term;
      }
    }
  }
}
