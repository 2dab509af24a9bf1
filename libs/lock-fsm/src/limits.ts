/**
 * Every limit of the lock state machine, in one place (CONVENTIONS "Limits").
 *
 * Two kinds live here. The contract's fixed bounds (name length, id lengths,
 * lock-delay cap, TTL range) are constants: the server checks them before
 * proposing, and the state machine checks them again on apply. The counting
 * limits (how many sessions, locks, waiters, ...) form `FsmLimits`: they are
 * part of the replicated semantics, so every replica of a cell must run with
 * the same values. Tests shrink them to reach the edges with short histories.
 */
import { assert, assertUint } from '@fencer/base';

/** Contract: a lock name is at most 512 bytes in all. */
export const NAME_BYTES_MAX = 512;
/** A namespace is one path segment of at most this many bytes (NAMESPACE_PATTERN in @fencer/base). */
export const NAMESPACE_BYTES_MAX = 64;
/** Request ids are client-chosen; a UUID is 36 bytes, so 128 leaves room for prefixes. */
export const REQUEST_ID_BYTES_MAX = 128;
/** Client ids name a process for operators ("billing-worker-7"). */
export const CLIENT_ID_BYTES_MAX = 256;
/** `<namespace>:<unique>`: a 64-byte namespace plus a generous unique part. */
export const SESSION_ID_BYTES_MAX = 192;
/** Contract: lock_delay_ms is capped by the server, default cap 60000. */
export const LOCK_DELAY_MS_MAX = 60_000;
/** TTL bounds the state machine accepts; the server clamps requests to its own, narrower policy first. */
export const TTL_MS_MIN = 1;
export const TTL_MS_MAX = 86_400_000;
/** Contract: ListLocks limit 0 means the server default (1000). */
/** Most members the member directory records: five replicas, plus learners and replacements in flight. */
export const MEMBERS_MAX = 64;
export const LIST_LOCKS_LIMIT_DEFAULT = 1000;
export const LIST_LOCKS_LIMIT_MAX = 1000;
/** waitMs is recorded for the leader's deadline tracker only; bound it so it stays a safe integer in every encoding. */
export const WAIT_MS_MAX = 2 ** 48;

export interface FsmLimits {
  /** Namespace records a cell keeps (owned, frozen and moved-out tombstones). Auto-claim creates them on demand. */
  readonly namespacesMax: number;
  /** Live sessions in the whole cell. */
  readonly sessionsMax: number;
  /** Live sessions in one namespace (the tenant quota). */
  readonly sessionsPerNamespaceMax: number;
  /** Names one session holds or waits for, together: so a promotion never pushes a session past its limit. */
  readonly locksPerSessionMax: number;
  /** FIFO waiters of one lock. */
  readonly waitersPerLockMax: number;
  /** Shared holders of one lock; a full lock counts as busy (try-lock TIMED_OUT, others queue). */
  readonly holdersPerLockMax: number;
  /** Outcomes remembered per session for idempotent retries (issue 5: the last 64 request ids). */
  readonly dedupePerSessionMax: number;
}

export const LIMITS: FsmLimits = {
  namespacesMax: 10_000,
  sessionsMax: 1_000_000,
  sessionsPerNamespaceMax: 100_000,
  locksPerSessionMax: 10_000,
  waitersPerLockMax: 10_000,
  holdersPerLockMax: 10_000,
  dedupePerSessionMax: 64,
};

/** Asserts the relations the state machine relies on; called on construction. */
export function checkLimits(limits: FsmLimits): void {
  for (const [key, value] of Object.entries(limits)) {
    assertUint(value, `limits.${key}`);
    assert(value >= 1, `limits.${key} must be at least 1`);
  }
  assert(limits.sessionsPerNamespaceMax <= limits.sessionsMax, 'a namespace cannot hold more sessions than the cell');
  // The snapshot encodes these counts as varints and positions as numbers; keep them far below 2^31.
  assert(limits.waitersPerLockMax < 2 ** 30 && limits.holdersPerLockMax < 2 ** 30, 'per-lock limits fit in 30 bits');
}

assert(NAMESPACE_BYTES_MAX + 5 < NAME_BYTES_MAX, 'a name must have room for "/ls/<namespace>/" and one segment');
assert(NAMESPACE_BYTES_MAX + 1 < SESSION_ID_BYTES_MAX, 'a session id must have room for "<namespace>:" and a unique part');
assert(LIST_LOCKS_LIMIT_DEFAULT <= LIST_LOCKS_LIMIT_MAX, 'the default page fits the maximum');
assert(TTL_MS_MIN >= 1 && TTL_MS_MIN <= TTL_MS_MAX, 'TTL range is not empty');
