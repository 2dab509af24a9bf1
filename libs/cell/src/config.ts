/**
 * What one lock cell replica is configured with: the group member's
 * settings (@fencer/group) and the lock layer's, and the test-only seams
 * through which the simulator and tests plant bugs and watch.
 */
import type { Entry } from '@fencer/raft';
import type { GroupConfig, ReplicaFactory } from '@fencer/group';
import type { ApplyResult, Command, LockStateMachine } from '@fencer/lock-fsm';
import type { DutyCommand } from './leader-duties.js';
import type { CellAuth } from './auth.js';

export interface LockCellConfig extends GroupConfig {
  readonly tickMs: number;
  readonly ttlDefaultMs: number;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  /** Held-open Acquire calls on this node. */
  readonly waitingCallsMax: number;
  readonly watchHistoryMax: number;
  readonly watcherBufferMax: number;
  readonly watchersMax: number;
  readonly watchProgressMs: number;
  /** Least time between the starts of two heartbeat confirmation rounds. */
  readonly heartbeatRoundSpacingMs: number;
  /**
   * Claim a namespace on its first OpenSession (a cell without a control plane owns every namespace).
   * False for a cell a control plane manages: it owns only what ClaimNamespace gave it (docs/decisions/0005-cells-own-namespaces.md).
   */
  readonly autoClaim: boolean;
  /**
   * Tenant tokens are required and checked on every lock-service call
   * (auth.ts; docs/decisions/0016-tenant-credentials-and-mtls.md). None: no
   * call is refused for its token (a fleet without --auth, the simulator).
   */
  readonly auth?: CellAuth;
}

/**
 * Test-only seams: planted bugs and the simulator's observation points. The
 * cell node never passes any; nothing in its configuration reaches them.
 */
export interface LockCellTestHooks {
  /** Planted bug: the leader extends leases at once, without confirming it still leads. */
  readonly heartbeatWithoutConfirmation?: boolean;
  /** Planted bug: every replica answers GetLock, CheckToken and ListLocks from its own applied state at once (no ReadIndex round, no forwarding). */
  readonly readWithoutBarrier?: boolean;
  /** Planted bug: the leader answers GRANTED for a free lock as soon as it proposes the Acquire, before the entry commits. */
  readonly grantBeforeCommit?: boolean;
  /** Rewrites what the state machine reports for an entry (planted lock-level bugs). */
  readonly rewriteApplied?: (command: Command, applied: ApplyResult) => ApplyResult;
  /** The state linearizable reads are answered from (a planted stale read). */
  readonly readState?: () => LockStateMachine;
  /** Every applied command, after the cell handled it. */
  readonly applied?: (entry: Entry, command: Command, applied: ApplyResult, fsm: LockStateMachine) => void;
  /** Every deadline command this leader proposes. */
  readonly dutyProposed?: (command: DutyCommand) => void;
  /** Planted bug: ImportNamespace keeps the revision base instead of raising it above the export's revisions. */
  readonly importWithoutRevisionRaise?: boolean;
  /** Builds the replica (replica-level planted bugs: `createReplica` from `@fencer/replica/testing`). */
  readonly makeReplica?: ReplicaFactory;
}
