/**
 * The production lock state machine inside a simulated replica, wrapped the
 * way the cell node wraps it (apps/cell-node's FsmAdapter): decode the
 * entry, apply it at its index, hand the command and its result to the node,
 * return the outcome to the proposer; snapshot and restore are the state
 * machine's own. Same options as production (auto-claim: a cell without a
 * control plane owns every namespace).
 *
 * The simulated leader's deadlines are production's `LeaderDuties`
 * (@fencer/lock-fsm), on the node's virtual monotonic clock.
 */
import type { Entry } from '@fencer/raft';
import type { StateMachine } from '@fencer/replica';
import { type ApplyResult, type Command, type LockEvent, LockStateMachine, decodeCommand } from '@fencer/lock-fsm';

/** Options of every simulated replica's state machine: production's (apps/cell-node/src/node.ts). */
export const LOCK_FSM_OPTIONS = { autoClaim: true } as const;

/**
 * Planted lock-level bugs, to show the lock checkers fire (tests only). Each
 * rewrites what the state machine reports, the same way on every replica, so
 * the replicas still agree and only a lock-level checker can tell:
 * - reuseToken: a fresh grant reports a token shared by every grant in its
 *   block of 64 revisions (tokens stop strictly increasing);
 * - doubleGrant: an Acquire that queued reports GRANTED at once, so a second
 *   holder is told it holds a busy lock;
 * - staleLockRead (in the simulation's read path): a linearizable read is
 *   answered from the most lagging replica's state.
 */
export type PlantedBug = 'reuseToken' | 'doubleGrant' | 'staleLockRead';
export const PLANTED_BUGS: readonly PlantedBug[] = ['reuseToken', 'doubleGrant', 'staleLockRead'];

/** What the node sees of every applied command (the cell node's afterApply). */
export type AfterApply = (command: Command, result: ApplyResult, fsm: LockStateMachine) => void;

export class LockMachine implements StateMachine {
  fsm = new LockStateMachine(LOCK_FSM_OPTIONS);

  constructor(
    private readonly afterApply: AfterApply,
    private readonly afterRestore: (fsm: LockStateMachine) => void,
    private readonly bug: PlantedBug | null = null,
  ) {}

  apply(entry: Entry): unknown {
    const command = decodeCommand(entry.data);
    let applied: ApplyResult = this.fsm.apply(entry.index, command);
    if (this.bug !== null && command.kind === 'Acquire') applied = plant(this.bug, applied);
    this.afterApply(command, applied, this.fsm);
    return applied.outcome;
  }

  snapshot(): Uint8Array {
    return this.fsm.snapshot();
  }

  restore(data: Uint8Array): void {
    this.fsm = LockStateMachine.restore(data, LOCK_FSM_OPTIONS);
    this.afterRestore(this.fsm);
  }

  /** The hash of the snapshot bytes: equal on replicas in the same state. */
  stateHash(): string {
    return this.fsm.stateHash();
  }
}

function plant(bug: PlantedBug, applied: ApplyResult): ApplyResult {
  const o = applied.outcome;
  if (!o.ok || !('status' in o) || o.deduped) return applied;
  if (bug === 'reuseToken' && o.status === 'GRANTED') {
    const token = (Math.floor(o.token / 64) * 64 + 1) as typeof o.token;
    const events = applied.events.map((e) => (e.type === 'ACQUIRED' && e.token === o.token ? { ...e, token } : e));
    return { ...applied, outcome: { ...o, token, revision: token }, events };
  }
  if (bug === 'doubleGrant' && o.status === 'QUEUED') {
    const token = applied.revision;
    const events = applied.events.map((e): LockEvent => (e.type === 'QUEUED' ? { ...e, type: 'ACQUIRED', token } : e));
    return { ...applied, outcome: { ok: true, status: 'GRANTED', token, holders: [], revision: token, deduped: false }, events };
  }
  return applied;
}
