/**
 * Per-namespace (tenant) quotas: how many sessions, locks and waiters one
 * namespace may have at once (docs/decisions/0020-tenant-quotas-and-rate-limits.md).
 *
 * The control plane is where a tenant's quotas are set; it replicates them
 * into the owning cell's log with SetNamespaceQuotas, and they travel with
 * the namespace in its export. They are part of the replicated state, so
 * every replica refuses the same entry. 0 means "no tenant quota": the
 * cell-wide limits (limits.ts) still apply. A quota lowered below what the
 * namespace already has takes nothing away: only new sessions, new lock
 * names and new waiters are refused, each with QUOTA_EXCEEDED.
 */
import { assertUint } from '@fencer/base';
import type { ByteReader, ByteWriter } from './codec.js';
import type { Failure, FsmErrorCode } from './types.js';

// validate.ts checks commands with checkQuotas: its `fail` is not imported here, so the two files stay out of a cycle.
function fail(code: FsmErrorCode, message: string): Failure {
  return { ok: false, code, message };
}

export interface NamespaceQuotas {
  /** Live sessions of the namespace; 0 = no tenant quota. */
  readonly maxSessions: number;
  /** Live locks (held, awaited or under lock-delay) of the namespace; 0 = no tenant quota. */
  readonly maxLocks: number;
  /** FIFO waiters over every lock of the namespace; 0 = no tenant quota. */
  readonly maxWaiters: number;
}

export const NO_QUOTAS: NamespaceQuotas = Object.freeze({ maxSessions: 0, maxLocks: 0, maxWaiters: 0 });

/** Largest value of one quota: far above any cell-wide limit, and small enough for every counter to compare exactly. */
export const QUOTA_VALUE_MAX = 2 ** 31 - 1;

const QUOTA_KEYS = ['maxSessions', 'maxLocks', 'maxWaiters'] as const;

/** Undefined when every quota is an integer in [0, QUOTA_VALUE_MAX]. */
export function checkQuotas(quotas: NamespaceQuotas): Failure | undefined {
  if (typeof quotas !== 'object' || quotas === null) return fail('INVALID_ARGUMENT', 'quotas must be an object');
  for (const key of QUOTA_KEYS) {
    const v = quotas[key];
    if (!(Number.isSafeInteger(v) && v >= 0 && v <= QUOTA_VALUE_MAX)) {
      return fail('INVALID_ARGUMENT', `quota ${key} must be an integer in [0, ${QUOTA_VALUE_MAX}] (0 = none), got ${String(v)}`);
    }
  }
  return undefined;
}

export function sameQuotas(a: NamespaceQuotas, b: NamespaceQuotas): boolean {
  return a.maxSessions === b.maxSessions && a.maxLocks === b.maxLocks && a.maxWaiters === b.maxWaiters;
}

/** A canonical copy (the shared constant when there are none), so equal quotas encode and compare alike. */
export function normalQuotas(q: NamespaceQuotas): NamespaceQuotas {
  if (sameQuotas(q, NO_QUOTAS)) return NO_QUOTAS;
  return Object.freeze({ maxSessions: q.maxSessions, maxLocks: q.maxLocks, maxWaiters: q.maxWaiters });
}

export function writeQuotas(w: ByteWriter, q: NamespaceQuotas): void {
  for (const key of QUOTA_KEYS) assertUint(q[key], `quota ${key}`);
  w.varuint(q.maxSessions).varuint(q.maxLocks).varuint(q.maxWaiters);
}

/** Reads three varuints; the caller checks them (checkQuotas) and turns a failure into its decode error. */
export function readQuotas(r: ByteReader): NamespaceQuotas {
  const maxSessions = r.varuint();
  const maxLocks = r.varuint();
  const maxWaiters = r.varuint();
  return normalQuotas({ maxSessions, maxLocks, maxWaiters });
}

/** The refusal of one more session in a namespace that has `sessions`, if its quota forbids it. */
export function sessionQuotaRefusal(namespace: string, q: NamespaceQuotas, sessions: number): Failure | undefined {
  if (q.maxSessions === 0 || sessions < q.maxSessions) return undefined;
  return fail('QUOTA_EXCEEDED', `namespace "${namespace}" holds its quota of ${q.maxSessions} sessions; close one or raise maxSessions`);
}

/** The refusal of one more lock name in a namespace that has `locks` live locks, if its quota forbids it. */
export function lockQuotaRefusal(namespace: string, q: NamespaceQuotas, locks: number): Failure | undefined {
  if (q.maxLocks === 0 || locks < q.maxLocks) return undefined;
  return fail('QUOTA_EXCEEDED', `namespace "${namespace}" holds its quota of ${q.maxLocks} locks; release one or raise maxLocks`);
}

/** The refusal of one more waiter in a namespace that has `waiters`, if its quota forbids it. */
export function waiterQuotaRefusal(namespace: string, q: NamespaceQuotas, waiters: number): Failure | undefined {
  if (q.maxWaiters === 0 || waiters < q.maxWaiters) return undefined;
  return fail('QUOTA_EXCEEDED', `namespace "${namespace}" has its quota of ${q.maxWaiters} waiters; retry later or raise maxWaiters`);
}
