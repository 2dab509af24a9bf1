/**
 * Every limit and default of the client, in one place (CONTRIBUTING.md, "Limits").
 * Defaults follow Chubby's numbers where they exist: a 12 s lease, a 45 s
 * grace period. The assertions at the bottom state how the values relate.
 */
import { assert } from '@fencer/base';

export const CLIENT_LIMITS = {
  /** Namespaces one client holds sessions in (one session per namespace). */
  sessionsMax: 64,
  /** Endpoints one client knows; leader hints add to the configured list up to this many. */
  endpointsMax: 64,
  /** Lock handles one session holds at once. */
  handlesPerSessionMax: 10_000,
  /** Times one acquire() resumes a QUEUED wait before it gives up (each resume waits up to the remaining time). */
  acquireResumesMax: 10_000,
  /** Namespaces whose serving replica a client in direct mode remembers (oldest forgotten first). */
  directNamespacesMax: 10_000,
  /** Consecutive immediate hops along leader hints before a retry waits for its backoff (stops hint ping-pong). */
  hintHopsMax: 3,
  /** Events one watch() skips after a reconnect, at most (those it had already delivered at a half-seen revision). */
  watchSkipMax: 100_000,
  /** COMPACTED resyncs one watch() does without seeing a single event in between. */
  watchResyncsMax: 5,
} as const;

export const CLIENT_DEFAULTS = {
  /** Requested session TTL; the server clamps it and answers what it uses. */
  ttlMs: 12_000,
  /** How long a session in jeopardy keeps trying to reach the cell before it is declared expired (Chubby: 45 s). */
  gracePeriodMs: 45_000,
  /** Clock-rate drift allowance of the local lease, in parts per million of the TTL. */
  driftPpm: 500,
  /** Fixed part of the local lease's safety margin: scheduling and GC pauses between reading the clock and acting. */
  driftMarginMs: 100,
  /** Deadline of one unary attempt (an Acquire adds its wait to this). */
  callTimeoutMs: 5_000,
  /** How long a call keeps retrying UNAVAILABLE before it gives up. */
  retryBudgetMs: 30_000,
  /** First backoff step; doubles per attempt up to backoffMaxMs, with jitter. */
  backoffBaseMs: 50,
  backoffMaxMs: 1_000,
  /** acquire() wait when the caller gives none. */
  waitMs: 30_000,
  /** A heartbeat unanswered this long (at least) counts as a dead stream: reconnect elsewhere. */
  heartbeatTimeoutMinMs: 1_000,
} as const;

/** The lowest drift allowance a caller may configure: the 500 ppm floor. */
export const DRIFT_PPM_MIN = 500;

/**
 * The local lease's safety margin for a session of this TTL: the drift
 * allowance (ppm of the TTL, rounded up) plus the fixed margin.
 */
export function leaseMarginMs(ttlMs: number, driftPpm: number, driftMarginMs: number): number {
  assert(Number.isFinite(ttlMs) && ttlMs > 0, `ttlMs must be positive, got ${ttlMs}`);
  assert(driftPpm >= DRIFT_PPM_MIN, `driftPpm must be at least ${DRIFT_PPM_MIN}, got ${driftPpm}`);
  assert(driftMarginMs >= 0, `driftMarginMs must not be negative, got ${driftMarginMs}`);
  return Math.ceil((ttlMs * driftPpm) / 1_000_000) + driftMarginMs;
}

/** Heartbeats go out every TTL/3: two may be lost before the lease is at risk. */
export function heartbeatIntervalMs(ttlMs: number): number {
  return Math.max(1, Math.floor(ttlMs / 3));
}

/** An unanswered heartbeat older than this means the stream is stuck (a paused node): reconnect. */
export function heartbeatTimeoutMs(ttlMs: number): number {
  return Math.max(CLIENT_DEFAULTS.heartbeatTimeoutMinMs, Math.floor(ttlMs / 4));
}

assert(CLIENT_DEFAULTS.driftPpm >= DRIFT_PPM_MIN, 'the default drift allowance respects the floor');
assert(CLIENT_DEFAULTS.gracePeriodMs > CLIENT_DEFAULTS.ttlMs, 'the grace period outlasts a lease, so a leader change fits inside it');
assert(
  heartbeatIntervalMs(CLIENT_DEFAULTS.ttlMs) + heartbeatTimeoutMs(CLIENT_DEFAULTS.ttlMs) <
    CLIENT_DEFAULTS.ttlMs - leaseMarginMs(CLIENT_DEFAULTS.ttlMs, CLIENT_DEFAULTS.driftPpm, CLIENT_DEFAULTS.driftMarginMs),
  'a stuck heartbeat is noticed and retried elsewhere before the default lease runs out',
);
assert(CLIENT_DEFAULTS.backoffBaseMs <= CLIENT_DEFAULTS.backoffMaxMs, 'backoff base below its cap');
