/**
 * The cell a call goes to: its namespace's route in the table in force, or,
 * with auto-tenants on, a tenant created through the routing source for a
 * namespace no route names yet (one creation per namespace at a time, shared
 * by the calls that wait for it). Calls by session id never create a
 * tenant: a session of a namespace nobody holds does not exist.
 */
import type { RoutingTable } from '@fencer/contract';
import type { CellPool, CellState } from './cell-pool.js';
import type { RouterMetrics } from './metrics.js';
import { fail } from './namespace-of-call.js';
import type { RoutingSource } from './routing-source.js';
import { forbidden } from './auth.js';

export type CellOf = (namespace: string, bySession: boolean) => Promise<CellState>;

export interface CellOfDeps {
  readonly source: RoutingSource;
  readonly pool: CellPool;
  readonly metrics: RouterMetrics;
  /** Create the tenant of an unknown namespace on first use, instead of NOT_FOUND NAMESPACE_NOT_FOUND. */
  readonly autoTenants: boolean;
  /** A fleet with tenant tokens: a namespace with no tenant is NAMESPACE_FORBIDDEN, as another tenant's is at its cell. */
  readonly auth?: boolean;
}

export function cellOfNamespace(deps: CellOfDeps): CellOf {
  const { source, pool, metrics } = deps;
  /** Creations under way, by namespace: bounded by the calls waiting on them. */
  const creating = new Map<string, Promise<RoutingTable>>();
  return async (namespace, bySession) => {
    let route = source.table().routes.get(namespace);
    if (route === undefined) {
      if (deps.auth === true) throw forbidden(namespace);
      if (bySession) fail('SESSION_NOT_FOUND', `the session's namespace "${namespace}" has no tenant, so the session does not exist`);
      if (!deps.autoTenants) fail('NAMESPACE_NOT_FOUND', `namespace "${namespace}" has no tenant: create it through the control plane`);
      let p = creating.get(namespace);
      if (!p) {
        p = source.createTenant(namespace).finally(() => creating.delete(namespace));
        creating.set(namespace, p);
        metrics.tenantsCreated.inc();
      }
      route = (await p).routes.get(namespace);
      if (route === undefined) fail('NAMESPACE_NOT_FOUND', `namespace "${namespace}" has no tenant`);
    }
    const cell = pool.cell(route!.cell);
    if (!cell) fail('NO_LEADER', `cell "${route!.cell}" of namespace "${namespace}" has no known replicas yet; retry`);
    return cell!;
  };
}
