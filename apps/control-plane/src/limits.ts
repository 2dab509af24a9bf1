/**
 * Every bound of the control plane's HTTP edge, in one place (CONTRIBUTING.md,
 * "Limits"). The meta state machine's own limits (tenants, journal records,
 * idempotency keys) live in @fencer/meta-fsm, and one member's (reads waiting
 * for a ReadIndex round, routing long polls) in @fencer/meta-fsm/group.
 */
import { assert } from '@fencer/base';

/** Largest request body accepted (413 beyond it): every body of the contract is a few hundred bytes. */
export const bodyBytesMax = 64 * 1024;
/** Contract: waitMs maximum of GET /v1/routing. */
export const routingWaitMsMax = 60_000;
/** Writes waiting for the meta group at once on one instance (the replica has its own proposal bound too). */
export const writesInFlightMax = 1_000;
/** How long a follower waits for its leader to answer a forwarded request (a long poll adds its waitMs). */
export const forwardTimeoutMs = 10_000;
/** A cell admin call (claim, drop, status) gives up after this long per replica tried. */
export const cellCallTimeoutMs = 3_000;
/**
 * A move's own cell calls (freeze, export page, import piece, unfreeze, an
 * export's size) give up after this long per replica tried: an import piece
 * is a proposal of up to 1 MiB committed on the target and the last one decodes
 * the whole export, which a loaded machine took more than 3 s for, so the
 * copy started over and over. Only the move worker waits for these; the
 * frozen-too-long rule (MOVE_TIMING.frozenMsMax, 30 s) still bounds a move.
 */
export const moveCallTimeoutMs = 20_000;
/**
 * No replica of a cell is tried after this long looking for its leader: a
 * cell whose replicas all hang (stopped, partitioned) answers CELL_UNAVAILABLE
 * before a follower's forwarded request times out, not NOT_LEADER after it
 * (six tries of 3 s would be 18 s).
 */
export const cellLeaderSearchMsMax = 5_000;

assert(
  forwardTimeoutMs > cellLeaderSearchMsMax + cellCallTimeoutMs + 1_000,
  'a forwarded create outlives the cell claim it waits for: the search, its last try, and a second for the answer to travel',
);
/** Dashboard event streams open at once on one instance (each holds a connection and, with a tenant, a share of a watch). */
export const dashboardStreamsMax = 200;
/** Tenants whose locks are watched at once on one instance (one Watch stream on a cell each). */
export const dashboardWatchesMax = 50;
/** Locks one tenant's view keeps: a page, not an export; ListLocks is there for the rest. */
export const dashboardLocksMax = 2_000;
/** Bytes a dashboard stream may have queued unsent before it is closed (the page reconnects and starts fresh). */
export const dashboardStreamBufferBytesMax = 4 * 1024 * 1024;
/** A comment line on an idle stream this often, so proxies and browsers keep it open. */
export const dashboardKeepAliveMs = 15_000;
/** How often the fleet view is rebuilt and sent while a stream is open. */
export const dashboardIntervalMs = 500;
/** A fleet view's meta read gives up after this long (the stream says so and keeps its last view). */
export const dashboardReadTimeoutMs = 3_000;
/** The pause before a failed lock watch starts again. */
export const dashboardWatchRetryMs = 1_000;
/** How often a watched tenant's route is checked, to follow it to another cell after a move. */
export const dashboardRouteCheckMs = 250;

assert(dashboardWatchesMax <= dashboardStreamsMax, 'a watch serves at least one stream');
assert(dashboardReadTimeoutMs > dashboardIntervalMs, 'a read may span rounds; the feed skips a round while one is running');
assert(routingWaitMsMax <= 60_000, 'the contract caps waitMs at 60 s');
