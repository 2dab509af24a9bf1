/**
 * @fencer/cell: one replica of a cell as a deterministic composition over
 * an injected environment (clock, random, logger, metrics sink, transport
 * send, timers, onFatal). The cell node wires sockets and real timers into
 * it; the simulator wires virtual ones into the very same classes.
 *
 * The seam, in two layers:
 *
 * 1. `GroupCore` (group.ts) is any Raft group's member: the Replica over a
 *    log store and a `StateMachine` adapter, propose(), readBarrier() (shared
 *    ReadIndex rounds), proposeConfChange(), snapshotNow(), the leadership
 *    observer (`GroupEvents.becameLeader` / `steppedDown`) and the member
 *    directory. It knows nothing of locks.
 *
 * 2. `LockCell` (lock-cell.ts) composes a GroupCore with the lock state
 *    machine and the lock layer: LeaderDuties (session, wait and lock-delay
 *    deadlines), the heartbeat confirmation round, held-open Acquire calls,
 *    the watch hub, and the request-level API (`call`, `heartbeat`, `watch`)
 *    with forwarding to the leader behind `LeaderForwarder`.
 *
 * Another state machine (the control plane's meta group) plugs in at layer
 * 1: build a `StateMachine` adapter for it, construct a `GroupCore` with it
 * and a `GroupEvents`, and put its own request layer on top, as LockCell
 * does. Reuse `HeartbeatConfirmer`, `afterChained` and the limits here
 * rather than copying them.
 *
 * Pure: imports only base, raft, wal's pure entry, replica and lock-fsm; no
 * clock, timer, randomness or I/O of its own (determinism.spec.ts).
 */
export { type Cancel, type CellEnv, type CellMetrics, noopCellMetrics } from './env.js';
export { type Done, type GroupConfig, type GroupEvents, GroupCore, type ReplicaFactory } from './group.js';
export { MemberDirectory, type MemberDirectoryOptions } from './member-directory.js';
export { type ConfirmRound, type ConfirmerTiming, HeartbeatConfirmer } from './heartbeat-confirmer.js';
export { HeartbeatRelay, type HeartbeatRelayOptions, type RelayRoute } from './heartbeat-relay.js';
export { DUTY_RETRY_MS, LeaderDuties, type DelaySeed, type DutyCommand, type SessionSeed, type WaiterSeed } from './leader-duties.js';
export { type WaitHandle, type WaitResult, WaitingCalls } from './waiting-calls.js';
export { type HubEvent, type WatchFilter, type WatchHubOptions, type WatchSink, WatchHub, matches } from './watch-hub.js';
export { afterChained, type After } from './timers.js';
export {
  type CallContext,
  type CallDone,
  type LeaderForwarder,
  type LockCellConfig,
  type LockCellTestHooks,
  type Receipt,
  type WatchRequest,
  LockCell,
} from './lock-cell.js';
export * from './wire.js';
export {
  CATCH_UP_TIMEOUT_MS,
  CATCH_UP_WAITS_MAX,
  FORWARD_TIMEOUT_MS,
  HEARTBEATS_WAITING_MAX,
  HEARTBEAT_BATCH_SESSIONS_MAX,
  HEARTBEAT_RELAY_WAITING_MAX,
  HEARTBEAT_RELAY_WINDOW_MS,
  TIMER_DELAY_MS_MAX,
  WAIT_GRACE_MS,
} from './limits.js';
