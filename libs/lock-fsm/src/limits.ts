/**
 * Every limit of the lock state machine, in one place (CONTRIBUTING.md, "Limits").
 *
 * The counting limits (how many sessions, locks, waiters, ...) form
 * `FsmLimits`: they are part of the replicated semantics, so every replica
 * of a cell must run with the same values. Tests shrink them to reach the
 * edges with short histories. The contract's fixed bounds (name length, id
 * lengths, lock-delay cap, TTL range) live in @fencer/contract: the server
 * checks them before proposing, and the state machine checks them again on
 * apply.
 */
import { assert, assertUint } from '@fencer/base';

/** Most members the member directory records: five replicas, plus learners and replacements in flight. */
export const MEMBERS_MAX = 64;

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
  /** Outcomes remembered per session for idempotent retries: the last 64 request ids. */
  readonly dedupePerSessionMax: number;
  /**
   * Bytes of namespace exports staged for import at once (StageImportChunk),
   * over every namespace: the largest tenant a move can carry into this cell.
   * An import is decoded in one entry's apply, which holds each replica's
   * event loop for it, so this bounds that pause too.
   */
  readonly importBytesMax: number;
}

export const LIMITS: FsmLimits = {
  namespacesMax: 10_000,
  sessionsMax: 1_000_000,
  sessionsPerNamespaceMax: 100_000,
  locksPerSessionMax: 10_000,
  waitersPerLockMax: 10_000,
  holdersPerLockMax: 10_000,
  dedupePerSessionMax: 64,
  importBytesMax: 64 * 1024 * 1024,
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

assert(MEMBERS_MAX >= 5, 'the member directory holds at least a full cell');
