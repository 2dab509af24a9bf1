/** The API's view of the meta group's records: what the contract's Tenant, Move and Snapshot schemas describe. */
import type { MetaStateMachine, Move, SnapshotRecord, Tenant } from '@fencer/meta-fsm';
import type { TenantUsage } from './tenant-quotas.js';

const iso = (ms: number): string => new Date(ms).toISOString();

/** `usage` as the tenant's cell reported it (tenant-quotas.ts), when it answered. */
export function tenantJson(t: Tenant, state: MetaStateMachine, usage?: TenantUsage): Record<string, unknown> {
  return {
    namespace: t.namespace,
    cell: t.cell,
    ...(t.owner !== undefined ? { owner: t.owner } : {}),
    createdAt: iso(t.createdAtMs),
    quotas: t.quotas,
    ...(usage !== undefined ? { usage: { sessions: usage.sessions, locks: usage.locks, waiters: usage.waiters } } : {}),
    moving: state.isMoving(t.namespace),
  };
}

export function moveJson(m: Move): Record<string, unknown> {
  return {
    id: m.id,
    namespace: m.namespace,
    fromCell: m.fromCell,
    toCell: m.toCell,
    state: m.state,
    createdAt: iso(m.createdAtMs),
    ...(m.finishedAtMs !== undefined ? { finishedAt: iso(m.finishedAtMs) } : {}),
    ...(m.error !== undefined ? { error: m.error } : {}),
    ...(m.unavailableMs !== undefined ? { unavailableMs: m.unavailableMs } : {}),
    ...(m.sessions !== undefined ? { sessions: m.sessions } : {}),
    ...(m.locks !== undefined ? { locks: m.locks } : {}),
    ...(m.revision !== undefined ? { revision: m.revision } : {}),
  };
}

export function snapshotJson(s: SnapshotRecord): Record<string, unknown> {
  const { createdAtMs, ...rest } = s;
  return { ...rest, createdAt: iso(createdAtMs) };
}
