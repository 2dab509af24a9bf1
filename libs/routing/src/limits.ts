/**
 * Every bound of the router and the session proxy that grows with client
 * input, each with the reason for its size. Relations are asserted when the
 * module loads.
 */
import { assert } from '@fencer/base';
import { ROUTES_MAX } from '@fencer/contract';

/** The routing table's own bounds (routes, cells, replicas per cell) are the contract's. */
export { CELLS_MAX, REPLICAS_PER_CELL_MAX, ROUTES_MAX } from '@fencer/contract';

/** Unary calls and watches one router has open towards one cell; beyond it a call gets RESOURCE_EXHAUSTED TOO_MANY_REQUESTS. */
export const CELL_CALLS_IN_FLIGHT_MAX = 4_096;
/** Sessions one heartbeat batcher tracks at once (pending or waiting for the leader). */
export const BATCHER_SESSIONS_MAX = 200_000;
/** Sessions in one HeartbeatBatch; the cell refuses batches above 100,000. */
export const BATCH_SESSIONS_MAX = 50_000;
/** KeepAlive streams open on one proxy or router. */
export const KEEPALIVE_STREAMS_MAX = 10_000;
/**
 * Heartbeats of one KeepAlive stream waiting for their batch. The client
 * library multiplexes every session of a process on one stream, so this is
 * about how many sessions one stream may carry; beyond it the stream ends
 * with RESOURCE_EXHAUSTED TOO_MANY_REQUESTS.
 */
export const STREAM_PENDING_MAX = 20_000;
/** Watch streams one router proxies at once. */
export const WATCHES_MAX = 10_000;
/**
 * Events a group of coalesced watches keeps for members that join late or
 * resume (watch-group.ts): a few seconds of a busy prefix, ~1 MiB at the
 * contract's event sizes.
 */
export const WATCH_BUFFER_EVENTS_MAX = 4_096;
/**
 * Events a group member's stream may hold unsent before it is cut with
 * SLOW_WATCHER: the group never waits for one reader. Matches a cell
 * node's own per-watcher buffer (its --watcher-buffer-max default).
 */
export const WATCH_MEMBER_BACKLOG_MAX = 10_000;
/** A routing file larger than this is refused (ROUTES_MAX routes of ~80 bytes, with room to spare). */
export const ROUTING_FILE_BYTES_MAX = 16 * 1024 * 1024;
/** Retry backoff after UNAVAILABLE: doubles from min to max. */
export const RETRY_BACKOFF_MS_MIN = 10;
export const RETRY_BACKOFF_MS_MAX = 250;
/**
 * The longest pause between attempts at a namespace frozen for a move
 * (NAMESPACE_MOVING). A move's frozen window is a few hundred ms (its
 * target is 300 ms): a backoff grown to RETRY_BACKOFF_MS_MAX would add up
 * to 250 ms after the target unfreezes. The frozen leader refuses an
 * attempt before proposing anything, so 20 attempts a second per waiting
 * call cost little.
 */
export const MOVING_RETRY_MS_MAX = 50;
/**
 * After a lost connection to a leader, the router asks the cell's replicas
 * who leads every LEADER_SEARCH_PAUSE_MS (a dead leader's followers elect
 * within a few round trips), for at most LEADER_SEARCH_MS_MAX: past two
 * election timeouts and an election, the ordinary backoff takes over.
 */
export const LEADER_SEARCH_PAUSE_MS = 10;
export const LEADER_SEARCH_MS_MAX = 3_000;
/** A call arriving without a deadline gets this budget (an Acquire adds its wait_ms). */
export const CALL_BUDGET_MS_DEFAULT = 30_000;
/** Heartbeat interval bounds: the proxy sends one batch per cell leader per interval. */
export const HEARTBEAT_INTERVAL_MS_DEFAULT = 250;
export const HEARTBEAT_INTERVAL_MS_MIN = 5;
/** A HeartbeatBatch the leader has not answered within this is given up and resent to the next replica. */
export const BATCH_TIMEOUT_MS = 2_000;

assert(BATCH_SESSIONS_MAX <= 100_000, 'a batch fits the cell limit');
assert(STREAM_PENDING_MAX <= BATCHER_SESSIONS_MAX, 'one stream fits the batcher');
assert(ROUTES_MAX * 80 <= ROUTING_FILE_BYTES_MAX, 'a full table fits a routing file');
assert(RETRY_BACKOFF_MS_MIN < RETRY_BACKOFF_MS_MAX, 'backoff grows');
assert(RETRY_BACKOFF_MS_MIN < MOVING_RETRY_MS_MAX && MOVING_RETRY_MS_MAX < RETRY_BACKOFF_MS_MAX, 'a move is retried sooner');
assert(HEARTBEAT_INTERVAL_MS_MIN < HEARTBEAT_INTERVAL_MS_DEFAULT, 'the default interval is allowed');
