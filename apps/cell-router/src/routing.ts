/**
 * The routing table: namespace -> cell, and each cell's replicas. Its
 * version only grows: a source hands the router a table, and the router
 * keeps it only if its version is newer than the one it has.
 *
 * The routing file (`--routing FILE`) and the control plane's answers are
 * parsed here. The file holds the contract's Routing object plus the cells'
 * replica addresses (the control plane gives those in GET /v1/fleet):
 *
 *   { "version": 3,
 *     "cells": [ { "id": "cell-1", "replicas": ["127.0.0.1:7001", …] }, … ],
 *     "routes": [ { "namespace": "payments", "cell": "cell-1", "state": "active" }, … ] }
 */
import { isValidNamespace } from '@fencer/base';
import { CELLS_MAX, REPLICAS_PER_CELL_MAX, ROUTES_MAX } from './limits.js';

export type RouteState = 'active' | 'moving';

export interface Route {
  readonly namespace: string;
  readonly cell: string;
  readonly state: RouteState;
}

export interface CellAddresses {
  readonly id: string;
  readonly replicas: readonly string[];
}

export interface RoutingTable {
  readonly version: number;
  readonly cells: ReadonlyMap<string, CellAddresses>;
  readonly routes: ReadonlyMap<string, Route>;
}

export const EMPTY_TABLE: RoutingTable = { version: 0, cells: new Map(), routes: new Map() };

export class RoutingFormatError extends Error {
  override readonly name = 'RoutingFormatError';
}

const ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;
const CELL_ID = /^[A-Za-z0-9._-]{1,64}$/;

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** The contract's Routing object ({ version, routes }), checked field by field. */
export function parseRoutes(body: unknown, where: string): { version: number; routes: Map<string, Route> } {
  if (!isObject(body)) throw new RoutingFormatError(`${where}: expected an object with "version" and "routes"`);
  const { version, routes } = body;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0)
    throw new RoutingFormatError(`${where}: "version" must be an integer >= 0`);
  if (!Array.isArray(routes)) throw new RoutingFormatError(`${where}: "routes" must be an array`);
  if (routes.length > ROUTES_MAX) throw new RoutingFormatError(`${where}: more than ${ROUTES_MAX} routes`);
  const out = new Map<string, Route>();
  routes.forEach((r: unknown, i) => {
    if (!isObject(r)) throw new RoutingFormatError(`${where}: routes[${i}] is not an object`);
    const { namespace, cell, state } = r;
    if (typeof namespace !== 'string' || !isValidNamespace(namespace))
      throw new RoutingFormatError(`${where}: routes[${i}].namespace is not a valid namespace`);
    if (typeof cell !== 'string' || !CELL_ID.test(cell))
      throw new RoutingFormatError(`${where}: routes[${i}].cell must be a cell id of [A-Za-z0-9._-]`);
    const s = state ?? 'active';
    if (s !== 'active' && s !== 'moving') throw new RoutingFormatError(`${where}: routes[${i}].state must be "active" or "moving"`);
    if (out.has(namespace)) throw new RoutingFormatError(`${where}: namespace "${namespace}" is routed twice`);
    out.set(namespace, { namespace, cell, state: s });
  });
  return { version, routes: out };
}

/** Cells with replica addresses: the routing file's `cells`, or GET /v1/fleet's `cells[].replicas[].grpc`. */
export function parseCells(cells: unknown, where: string): Map<string, CellAddresses> {
  if (!Array.isArray(cells)) throw new RoutingFormatError(`${where}: "cells" must be an array`);
  if (cells.length > CELLS_MAX) throw new RoutingFormatError(`${where}: more than ${CELLS_MAX} cells`);
  const out = new Map<string, CellAddresses>();
  cells.forEach((c: unknown, i) => {
    if (!isObject(c) || typeof c.id !== 'string' || !CELL_ID.test(c.id))
      throw new RoutingFormatError(`${where}: cells[${i}].id must be a cell id of [A-Za-z0-9._-]`);
    if (!Array.isArray(c.replicas) || c.replicas.length === 0 || c.replicas.length > REPLICAS_PER_CELL_MAX) {
      throw new RoutingFormatError(`${where}: cells[${i}].replicas must list 1-${REPLICAS_PER_CELL_MAX} host:port addresses`);
    }
    const replicas = c.replicas.map((r: unknown, j) => {
      const a = typeof r === 'string' ? r : isObject(r) ? r.grpc : undefined;
      if (typeof a !== 'string' || !ADDRESS.test(a)) throw new RoutingFormatError(`${where}: cells[${i}].replicas[${j}] is not host:port`);
      return a;
    });
    out.set(c.id, { id: c.id, replicas });
  });
  return out;
}

/** A whole routing file. Every route must name a listed cell. */
export function parseRoutingFile(body: unknown, where: string): RoutingTable {
  const { version, routes } = parseRoutes(body, where);
  const cells = parseCells((body as Record<string, unknown>).cells, where);
  for (const r of routes.values()) {
    if (!cells.has(r.cell))
      throw new RoutingFormatError(`${where}: namespace "${r.namespace}" is routed to cell "${r.cell}", which "cells" does not list`);
  }
  return { version, cells, routes };
}

/** The JSON form of a table, as the routing file holds it. */
export function routingFileJson(t: RoutingTable): string {
  const body = {
    version: t.version,
    cells: [...t.cells.values()].map((c) => ({ id: c.id, replicas: [...c.replicas] })),
    routes: [...t.routes.values()].sort((a, b) => (a.namespace < b.namespace ? -1 : 1)),
  };
  return `${JSON.stringify(body, null, 2)}\n`;
}

/** The cell with the fewest namespaces (ties: the first in table order): where auto-tenants places a new namespace without a control plane. */
export function leastLoadedCell(t: RoutingTable): string | undefined {
  const counts = new Map<string, number>([...t.cells.keys()].map((id) => [id, 0]));
  for (const r of t.routes.values()) if (counts.has(r.cell)) counts.set(r.cell, counts.get(r.cell)! + 1);
  let best: string | undefined;
  for (const [id, n] of counts) if (best === undefined || n < counts.get(best)!) best = id;
  return best;
}
