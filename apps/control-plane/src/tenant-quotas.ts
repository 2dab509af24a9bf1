/**
 * A tenant's quotas on its cell, and its usage read back from there
 * (docs/decisions/0020-tenant-quotas-and-rate-limits.md). The meta group
 * records quotas; the owning cell enforces the counting ones (sessions,
 * locks, waiters) in its lock state machine, so the control plane sends them
 * there: when the tenant is created, when its quotas change, and from the
 * ownership reconciler whenever the cell reports other values (after a
 * failed push, a move, a claim). `acquiresPerSecond` is the routers' (they
 * read it from the routing table's tenant entries), not the cell's.
 */
import type { adminpb } from '@fencer/protocol';
import type { Quotas, Tenant } from '@fencer/meta-fsm';
import type { CellDirectory } from './cells.js';

/** How long a GET of tenants waits for a cell's usage before answering without it. */
export const usageWaitMs = 1_000;

/** The contract's quotas as a cell enforces them: an absent quota is 0, none. */
export function cellQuotas(q: Quotas): adminpb.NamespaceQuotas {
  return { maxSessions: q.maxSessions ?? 0, maxLocks: q.maxLocks ?? 0, maxWaiters: q.maxWaiters ?? 0 };
}

/** Whether any quota the cell enforces is set. */
export function hasCellQuotas(q: Quotas): boolean {
  return q.maxSessions !== undefined || q.maxLocks !== undefined || q.maxWaiters !== undefined;
}

export function sameCellQuotas(a: adminpb.NamespaceQuotas | undefined, b: adminpb.NamespaceQuotas): boolean {
  const x = a ?? { maxSessions: 0, maxLocks: 0, maxWaiters: 0 };
  return x.maxSessions === b.maxSessions && x.maxLocks === b.maxLocks && x.maxWaiters === b.maxWaiters;
}

/**
 * Sends the tenant's quotas to its cell. False when the cell did not take
 * them now (no leader, the namespace frozen for a move, not claimed yet):
 * the ownership reconciler sends them again on its next pass, so a caller
 * only logs and wakes it.
 */
export async function pushQuotas(
  cells: Pick<CellDirectory, 'setQuotas'>,
  tenant: Tenant,
  logger?: { warn(obj: object, msg: string): void },
): Promise<boolean> {
  try {
    await cells.setQuotas(tenant.cell, tenant.namespace, cellQuotas(tenant.quotas));
    return true;
  } catch (e) {
    logger?.warn(
      { cell: tenant.cell, namespace: tenant.namespace, err: (e as Error).message },
      'quotas not on the cell yet; the reconciler retries',
    );
    return false;
  }
}

export interface TenantUsage {
  readonly sessions: number;
  readonly locks: number;
  readonly waiters: number;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([p.catch(() => undefined), late]).finally(() => clearTimeout(timer));
}

/**
 * Usage of each tenant, by namespace, from one ListNamespaces per cell
 * involved. A cell that does not answer within usageWaitMs leaves its
 * tenants without usage (the contract makes it optional).
 */
export async function usageOf(
  cells: Pick<CellDirectory, 'listNamespaces' | 'has'>,
  tenants: readonly Tenant[],
  waitMs = usageWaitMs,
): Promise<Map<string, TenantUsage>> {
  const wanted = new Map<string, Set<string>>();
  for (const t of tenants) {
    if (!cells.has(t.cell)) continue;
    const names = wanted.get(t.cell) ?? new Set<string>();
    names.add(t.namespace);
    wanted.set(t.cell, names);
  }
  const usage = new Map<string, TenantUsage>();
  await Promise.all(
    [...wanted].map(async ([cell, names]) => {
      const entries = await withTimeout(cells.listNamespaces(cell), waitMs);
      for (const e of entries ?? []) {
        if (names.has(e.namespace) && e.state !== 'moved')
          usage.set(e.namespace, { sessions: e.sessions, locks: e.locks, waiters: e.waiters });
      }
    }),
  );
  return usage;
}
