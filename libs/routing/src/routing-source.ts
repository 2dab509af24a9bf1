/**
 * Where a router or proxy gets its routing table from, and how auto-tenants
 * creates a namespace. Three sources:
 *
 * - `FileRoutingSource` (`--routing FILE`, file-routing-source.ts): the
 *   file, reloaded when it changes; auto-tenants rewrites it.
 * - `ControlPlaneRoutingSource` (`--control-plane URL[,URL...]`,
 *   control-plane-routing-source.ts): the contract's long poll on the
 *   instances of the control plane's meta group; auto-tenants is
 *   `POST /v1/tenants`.
 * - `StaticRoutingSource`: a fixed table, for tests and for a router whose
 *   cells never move.
 *
 * Every source keeps the one rule a router relies on: a table is adopted
 * only if its version is newer than the one in force, and while a source
 * cannot be read the last table keeps serving.
 */
import { FencerError } from '@fencer/base';
import { EMPTY_TABLE, type RoutingTable } from '@fencer/contract';
import type { ProbeResult } from '@fencer/service';

export interface RoutingSource {
  /** The newest table known. */
  table(): RoutingTable;
  /** Starts following the source; resolves once a first table is in (or the first attempt failed). */
  start(): Promise<void>;
  /** Asks the source now, for a caller that met NAMESPACE_NOT_HERE; resolves with the newest table. */
  refresh(): Promise<RoutingTable>;
  /** Auto-tenants: creates the namespace's tenant on the least-loaded cell; resolves with a table that routes it. */
  createTenant(namespace: string): Promise<RoutingTable>;
  /** Called with every newer table adopted. */
  onChange(listener: (t: RoutingTable) => void): void;
  /**
   * Tenants' Acquire rate limits (acquiresPerSecond) by namespace, as last
   * learned; absent on a source that has none (a routing file).
   */
  acquireRates?(): ReadonlyMap<string, number>;
  close(): void;
}

/** The table in force and its listeners; `adopt` is the only way a table changes, so versions only grow. */
export abstract class AdoptingSource {
  protected current: RoutingTable = EMPTY_TABLE;
  private readonly listeners: ((t: RoutingTable) => void)[] = [];

  table(): RoutingTable {
    return this.current;
  }

  onChange(listener: (t: RoutingTable) => void): void {
    this.listeners.push(listener);
  }

  /** Adopts `t` if its version is newer; returns the table in force. */
  protected adopt(t: RoutingTable): RoutingTable {
    if (t.version > this.current.version) {
      this.current = t;
      for (const l of this.listeners) l(t);
    }
    return this.current;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A fixed table, for tests and for a router whose cells never move. */
export class StaticRoutingSource extends AdoptingSource implements RoutingSource {
  constructor(table: RoutingTable) {
    super();
    this.current = table;
  }
  async start(): Promise<void> {}
  async refresh(): Promise<RoutingTable> {
    return this.current;
  }
  set(t: RoutingTable): void {
    this.adopt(t);
  }
  createTenant(namespace: string): Promise<RoutingTable> {
    return Promise.reject(new FencerError('NAMESPACE_NOT_FOUND', `namespace "${namespace}" has no tenant`));
  }
  close(): void {}
}

/**
 * The readiness probe of a router or proxy (@fencer/service serveMetrics): ready once it holds a routing table
 * (version above 0), whichever source gave it; a source it can no longer read keeps the last table, and serving it.
 */
export function routingReadiness(source: Pick<RoutingSource, 'table'>): () => ProbeResult {
  return () => {
    const t = source.table();
    if (t.version > 0) return { ok: true };
    return { ok: false, reason: 'no routing table yet: the control plane (or the routing file) has not answered' };
  };
}
