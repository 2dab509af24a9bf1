/**
 * Bounds of the chaos harness, in one place. Every buffer or list that grows
 * with traffic or with the length of a run has a `…Max` here.
 */
import { assert } from '@fencer/base';

/** Bytes a delaying proxy connection may hold back in one direction before it is reset (as an overfull router would drop). */
export const PROXY_DELAYED_BYTES_MAX = 16 * 1024 * 1024;
/** Connections one proxy accepts at once; more are refused. */
export const PROXY_CONNECTIONS_MAX = 256;
/** Longest delay (plus jitter) a link fault may add, so a heal is never stuck behind a huge timer. */
export const PROXY_DELAY_MS_MAX = 5_000;

/** A process pause (SIGSTOP) never lasts longer than this. */
export const PAUSE_MS_MAX = 20_000;

/** How long past its time a scheduled fault waits for the cell to be ready for it (a leader and a follower up). */
export const SCHEDULED_START_PATIENCE_MS = 30_000;
/** Faults the nemesis records in one run (a 30-minute soak makes about a thousand). */
export const FAULTS_PER_RUN_MAX = 100_000;

/** History records one worker writes in one run; a worker stops issuing operations when it reaches it. */
export const HISTORY_RECORDS_PER_WORKER_MAX = 5_000_000;
/** Watch events one watcher stream keeps in memory before it restarts from its last revision. */
export const WATCH_EVENTS_PER_STREAM_MAX = 5_000;

/** Search states the per-lock linearizability search may visit for one name before it gives up (a checker timeout). */
export const LINEARIZABILITY_STATES_MAX = 2_000_000;
/** Violations kept per checker (the rest are only counted). */
export const VIOLATIONS_KEPT_MAX = 50;

/** How long the harness waits for the healed cell to converge (all replicas applied the leader's commit index). */
export const CONVERGE_MS_MAX = 90_000;

assert(PROXY_DELAY_MS_MAX < PAUSE_MS_MAX, 'delays are shorter than pauses');
assert(VIOLATIONS_KEPT_MAX > 0 && LINEARIZABILITY_STATES_MAX > 1000, 'checker bounds are usable');
