/**
 * Every bound of the cell layer, named, with the relations between them
 * asserted when the module loads. Per-node sizes that operators tune
 * (waiting calls, watchers, watch history) come from the node's
 * configuration; these are the fixed ones.
 */
import { assert } from '@fencer/base';
import { TIMER_DELAY_MS_MAX } from '@fencer/group';
import { WAIT_MS_MAX } from '@fencer/contract';

/** Sessions in one HeartbeatBatch (a session proxy's batch, or a follower's relay). */
export const HEARTBEAT_BATCH_SESSIONS_MAX = 100_000;

/** Heartbeat batches waiting for the next leadership-confirmation round on one leader. */
export const HEARTBEATS_WAITING_MAX = 1_000_000;

/**
 * How long a follower's relay batch gathers its clients' heartbeats when no
 * batch is at the leader (with one there, the next leaves when it returns):
 * one event-loop turn of arrivals, at the cost of this much latency when idle.
 */
export const HEARTBEAT_RELAY_WINDOW_MS = 1;

/** Heartbeat callers one follower's relay holds (gathering or at the leader). */
export const HEARTBEAT_RELAY_WAITING_MAX = 1_000_000;

/** A forwarded call the leader does not answer within this long fails with NO_LEADER. */
export const FORWARD_TIMEOUT_MS = 10_000;

/** A held-open Acquire answers QUEUED if nothing decided it this long after its wait ran out. */
export const WAIT_GRACE_MS = 5_000;

/** Follower Watches from now waiting for their replica to catch up with the leader's read index. */
export const CATCH_UP_WAITS_MAX = 10_000;

/** A follower Watch whose replica has not applied up to the leader's revision within this long fails with DEADLINE_EXCEEDED. */
export const CATCH_UP_TIMEOUT_MS = FORWARD_TIMEOUT_MS;

assert(HEARTBEATS_WAITING_MAX >= HEARTBEAT_BATCH_SESSIONS_MAX, 'one full heartbeat batch always fits the confirmation queue');
assert(HEARTBEAT_RELAY_WINDOW_MS < FORWARD_TIMEOUT_MS, 'a relay batch gathers for far less than the leader is given to answer it');
assert(HEARTBEAT_RELAY_WAITING_MAX >= HEARTBEAT_BATCH_SESSIONS_MAX, 'a full relay batch of one-session callers fits the relay');
assert(WAIT_GRACE_MS < FORWARD_TIMEOUT_MS, 'a leader answers a held Acquire before the forwarding follower gives up on it');
assert(WAIT_MS_MAX + FORWARD_TIMEOUT_MS <= Number.MAX_SAFE_INTEGER, 'the longest wait plus its forwarding slack is an exact number of ms');
assert(CATCH_UP_TIMEOUT_MS <= TIMER_DELAY_MS_MAX && FORWARD_TIMEOUT_MS <= TIMER_DELAY_MS_MAX, 'fixed timeouts fit one timer');
