/**
 * @fencer/cell: one replica of a lock cell, the lock layer over
 * @fencer/group's GroupCore, as a deterministic composition over an
 * injected environment (CellEnv: the group's, with the lock layer's
 * metrics). The cell node wires sockets and real timers into it; the
 * simulator wires virtual ones into the very same classes.
 *
 * `LockCell` (lock-cell.ts) composes a GroupCore with the lock state
 * machine and the lock layer, one concept a file: the apply stream
 * (apply-stream.ts), the leader's deadlines (leader-duties.ts), the
 * request API (request-api.ts: `call`, served on the leader or forwarded
 * behind `LeaderForwarder`) with held Acquires (held-acquire.ts,
 * waiting-calls.ts), heartbeats behind the leader's confirmation round and
 * the follower's relay (heartbeats.ts, heartbeat-relay.ts), Watch
 * (watches.ts, watch-hub.ts), the fixed limits (limits.ts) and the wire
 * shapes of the contract's messages (wire.ts).
 *
 * Consumers of the group layer itself (GroupCore, ReadIndexRounds,
 * afterChained) import @fencer/group. `Cancel` and TIMER_DELAY_MS_MAX are
 * re-exported here because the cell's own API is written in them (a
 * forwarder returns a Cancel; CellEnv.after takes at most TIMER_DELAY_MS_MAX).
 *
 * Pure: imports only base, raft, wal's pure entry, replica, group and
 * lock-fsm; no clock, timer, randomness or I/O of its own
 * (determinism.spec.ts).
 */
export { type CellEnv, type CellMetrics, noopCellMetrics } from './env.js';
export { type Cancel, TIMER_DELAY_MS_MAX } from '@fencer/group';
export { type LockCellConfig, type LockCellTestHooks } from './config.js';
export { LockCell } from './lock-cell.js';
export { type CallContext, type CallDone, type LeaderForwarder, type Receipt, namespaceOfRequest } from './request-api.js';
export { type CellAuth } from './auth.js';
export { type WatchRequest } from './watches.js';
export { HeartbeatRelay, type HeartbeatRelayOptions, type RelayRoute } from './heartbeat-relay.js';
export {
  DUTY_RETRY_MS,
  LeaderDuties,
  waitKey,
  type DelaySeed,
  type DutyCommand,
  type SessionSeed,
  type WaiterSeed,
} from './leader-duties.js';
export { NamespaceMoves, heldImport, type UnfreezeView } from './namespace-moves.js';
export { type WaitHandle, type WaitResult, WaitingCalls } from './waiting-calls.js';
export { type HubEvent, type WatchFilter, type WatchHubOptions, type WatchSink, WatchHub, matches } from './watch-hub.js';
export * from './wire.js';
export {
  CATCH_UP_TIMEOUT_MS,
  CATCH_UP_WAITS_MAX,
  FORWARD_TIMEOUT_MS,
  HEARTBEATS_WAITING_MAX,
  HEARTBEAT_BATCH_SESSIONS_MAX,
  HEARTBEAT_RELAY_WAITING_MAX,
  HEARTBEAT_RELAY_WINDOW_MS,
  WAIT_GRACE_MS,
} from './limits.js';
