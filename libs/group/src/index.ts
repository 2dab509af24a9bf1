/**
 * @fencer/group: one member of a Raft group, whatever its state machine, as
 * a deterministic composition over an injected environment (clock, random,
 * logger, metrics sink, transport send, timers, onFatal). A process wires
 * sockets and real timers into it; the simulator wires virtual ones into the
 * very same classes.
 *
 * `GroupCore` holds the Replica over a log store and the state machine's
 * adapter, and offers propose(), readBarrier() (ReadIndex rounds shared by
 * every read waiting: `ReadIndexRounds`), proposeConfChange(),
 * snapshotNow(), the leadership observer (`GroupEvents.becameLeader` /
 * `steppedDown`) and the member directory. It knows nothing of any
 * particular state machine.
 *
 * How a state machine plugs in (the lock cell in @fencer/cell and the
 * control plane's meta group in @fencer/meta-fsm/group both do this):
 * 1. write a `StateMachine` adapter (@fencer/replica) that decodes an
 *    entry, applies it to the machine and tells the layer's own parts;
 * 2. construct a `GroupCore` with it and a `GroupEvents`: nothing is called
 *    back yet;
 * 3. build the rest of the layer (its request API, its leader-only work),
 *    then call `core.open()` last: the replica restores its snapshot and
 *    replays the log through the adapter, so every callback finds the
 *    layer whole.
 * Reuse `ReadIndexRounds` (for anything else that must wait for leadership
 * to be confirmed, such as heartbeats), `afterChained` for waits longer
 * than one timer, and the limits here, rather than copying them.
 *
 * Pure: imports only base, raft, wal's pure entry and replica; no clock,
 * timer, randomness or I/O of its own (determinism.spec.ts).
 */
export { type Cancel, type GroupEnv, type GroupMetrics, noopGroupMetrics } from './env.js';
export { type Done, type GroupConfig, type GroupEvents, GroupCore, type ReplicaFactory } from './group-core.js';
export { MemberDirectory, type MemberDirectoryOptions } from './member-directory.js';
export { type ReadIndexRound, type RoundSpacing, ReadIndexRounds } from './read-index-rounds.js';
export { afterChained, type After } from './timers.js';
export { TIMER_DELAY_MS_MAX } from './limits.js';
