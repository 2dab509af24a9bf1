/**
 * The apply stream: the lock state machine as the group's StateMachine
 * adapter, and what every replica does after each applied command or
 * restored snapshot, in this order: watchers hear the events first (the
 * hub's history follows the log), then the leader's deadlines follow the
 * command, then the member directory, then held Acquires are resolved, and
 * last the follower watches waiting to catch up run (they start from state
 * that already holds all of the above).
 *
 * The state machine is replaced whole by a snapshot (restart or
 * InstallSnapshot). A new leader seeds its deadlines from the state as
 * applied (docs/architecture.md, "Promises": every session, waiter and
 * lock-delay gets a fresh full period).
 */
import { NodeId, type Namespace } from '@fencer/base';
import { namespaceOfSessionId, parseLockName } from '@fencer/contract';
import type { GroupCore } from '@fencer/group';
import type { Entry } from '@fencer/raft';
import type { StateMachine } from '@fencer/replica';
import {
  type ApplyResult,
  type Command,
  type ImportNamespaceOutcome,
  type Outcome,
  LockStateMachine,
  decodeCommand,
} from '@fencer/lock-fsm';
import type { LockCellConfig, LockCellTestHooks } from './config.js';
import type { CellEnv } from './env.js';
import type { LeaderDuties } from './leader-duties.js';
import type { NamespaceMoves } from './namespace-moves.js';
import type { WaitingCalls } from './waiting-calls.js';
import type { Watches } from './watches.js';

export interface ApplyStreamParts {
  readonly config: LockCellConfig;
  readonly env: CellEnv;
  readonly hooks: LockCellTestHooks;
  readonly core: GroupCore;
  readonly duties: LeaderDuties;
  readonly waits: WaitingCalls;
  readonly watches: Watches;
  readonly moves: NamespaceMoves;
}

/** The state machine's options: the cell's auto-claim, and a planted import bug (tests only). */
function fsmOptions(parts: ApplyStreamParts): { autoClaim: boolean; plantedBug?: 'importWithoutRevisionRaise' } {
  const autoClaim = parts.config.autoClaim;
  return parts.hooks.importWithoutRevisionRaise === true ? { autoClaim, plantedBug: 'importWithoutRevisionRaise' } : { autoClaim };
}

export class ApplyStream implements StateMachine {
  /** The lock state as applied here: replaced whole when a snapshot is restored. */
  fsm: LockStateMachine;

  constructor(private readonly parts: ApplyStreamParts) {
    this.fsm = new LockStateMachine(fsmOptions(parts));
  }

  apply(entry: Entry): unknown {
    const { hooks } = this.parts;
    const command = decodeCommand(entry.data);
    let applied = this.fsm.apply(entry.index, command);
    if (hooks.rewriteApplied) applied = hooks.rewriteApplied(command, applied);
    this.afterApply(command, applied);
    hooks.applied?.(entry, command, applied, this.fsm);
    return applied.outcome;
  }

  snapshot(): Uint8Array {
    return this.fsm.snapshot();
  }

  restore(data: Uint8Array): void {
    this.fsm = LockStateMachine.restore(data, fsmOptions(this.parts));
    this.afterRestore();
  }

  /** Every session, waiter and lock-delay gets a fresh full period (this replica just became the leader). */
  seedDuties(): void {
    const { duties, env } = this.parts;
    duties.becomeLeader(env.clock.monoMs(), this.fsm.sessions(), this.fsm.waiters(), this.fsm.delayedLocks());
  }

  /** After every applied command, on every replica: watchers, deadlines, the member directory, held calls, catch-ups. */
  private afterApply(command: Command, applied: ApplyResult): void {
    const { env, core, duties, waits, watches } = this.parts;
    const { outcome, events, revision } = applied;
    watches.hub.publish(revision, events);
    duties.applied(env.clock.monoMs(), command, outcome, events);
    if (command.kind === 'ExpireSession' && outcome.ok) env.metrics.sessionExpired();
    if (command.kind === 'SetMemberAddress' && outcome.ok) core.members.learn(NodeId(command.id), command.address, command.peerAddress);
    if (command.kind === 'ForgetMember' && outcome.ok) core.members.forget(NodeId(command.id));
    if (outcome.ok) this.afterNamespaceChange(command, outcome, revision);
    for (const event of events) {
      const requestId = event.requestId;
      if (!requestId) continue;
      if (event.type === 'ACQUIRED')
        waits.resolve(event.sessionId, requestId, { kind: 'granted', token: event.token, revision: event.revision });
      else if (event.type === 'CANCELED') waits.resolve(event.sessionId, requestId, { kind: 'cancelled', revision: event.revision });
      else if (event.type === 'EXPIRED') waits.resolve(event.sessionId, requestId, { kind: 'session-gone' });
    }
    watches.runCatchUps();
  }

  /**
   * A move's steps as this replica sees them (docs/decisions/0019-the-move-worker.md): a freeze ends the
   * namespace's held Acquires and watchers; the sessions, waits and lock-delays an import brings join the
   * leader's deadlines, and its history continues in the watch hub; a drop leaves the deadlines; after an
   * unfreeze the first write is timed.
   */
  private afterNamespaceChange(command: Command, outcome: Outcome, revision: number): void {
    const { env, duties, waits, watches, moves } = this.parts;
    const changed = (outcome as { changed?: boolean }).changed === true;
    switch (command.kind) {
      case 'FreezeNamespace':
        if (!changed) return;
        watches.namespaceFrozen(command.namespace, revision);
        return waits.resolveNamespace(command.namespace, { kind: 'namespace-moving' });
      case 'UnfreezeNamespace':
        if (changed) moves.unfrozen(command.namespace, env.clock.monoMs());
        return;
      case 'ImportNamespace':
      case 'ImportStagedNamespace':
        if (!command.activate) moves.importedHere(command.namespace);
        return this.imported(command.namespace, outcome as ImportNamespaceOutcome, revision);
      case 'DropNamespace':
        moves.forgetImport(command.namespace);
        return duties.namespaceDropped(command.namespace);
      case 'OpenSession':
        if (moves.awaitingFirstWrite) moves.wrote(command.namespace, env.clock.monoMs());
        return;
      case 'Acquire':
      case 'Release':
      case 'CloseSession':
      case 'CancelWait':
        if (moves.awaitingFirstWrite) moves.wrote(namespaceOfSessionId(command.sessionId) ?? '', env.clock.monoMs());
        return;
      default:
        return;
    }
  }

  private imported(namespace: Namespace, outcome: ImportNamespaceOutcome, revision: number): void {
    const { env, duties, watches, moves, hooks } = this.parts;
    // The planted import bug leaves revisions below the export's; the hub's assertion would end the replica before a checker sees tokens.
    const planted = hooks.importWithoutRevisionRaise === true && outcome.namespaceRevision >= revision;
    if (!planted) watches.hub.imported(namespace, outcome.namespaceRevision, revision);
    const carried = moves.takeCarriedWaits(namespace);
    if (!duties.isActive) return;
    const inNamespace = (name: string): boolean => {
      const parsed = parseLockName(name);
      return parsed.ok && parsed.namespace === namespace;
    };
    const fsm = this.fsm;
    duties.namespaceImported(
      env.clock.monoMs(),
      [...fsm.sessions()].filter((s) => s.namespace === namespace),
      [...fsm.waiters()].filter((w) => namespaceOfSessionId(w.sessionId) === namespace),
      [...fsm.delayedLocks()].filter((d) => inNamespace(d.name)),
      carried,
    );
  }

  /** The state machine was replaced by a snapshot: watchers resume elsewhere, the directory is relearned, a leader reseeds. */
  private afterRestore(): void {
    const { core, watches, moves } = this.parts;
    // What this replica applied is replaced: a frozen import it noted may be gone (a target that misses the note only acknowledges no heartbeat until the unfreeze).
    moves.forgetImport(null);
    watches.hub.reset(this.fsm.revision);
    for (const [id, m] of this.fsm.members()) core.members.learn(NodeId(id), m.address, m.peerAddress);
    if (core.isLeader) this.seedDuties();
    watches.runCatchUps();
  }
}
