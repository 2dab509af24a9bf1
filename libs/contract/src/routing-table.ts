/**
 * The routing table: namespace -> cell, and each cell's replica addresses.
 * Its version only grows: a source hands a router a table, and the router
 * keeps it only if its version is newer than the one it has.
 *
 * Three places speak it, and all of them through this file: the control
 * plane answers GET /v1/routing with the contract's Routing object
 * (`version`, `routes`) and GET /v1/fleet with the cells' replicas; a
 * routing file (`--routing FILE`) holds both in one JSON document:
 *
 *   { "version": 3,
 *     "cells": [ { "id": "cell-1", "replicas": ["127.0.0.1:7001", …] }, … ],
 *     "routes": [ { "namespace": "payments", "cell": "cell-1", "state": "active" }, … ] }
 *
 * Here are its types, its one parser, its one writer and the one rule that
 * places a new tenant on a cell. Pure: no I/O, no clock.
 */
import { assert } from '@fencer/base';
import { isValidNamespace } from './names.js';

/** Namespaces in one routing table: a fleet of about eight cells with a few thousand tenants each. */
export const ROUTES_MAX = 100_000;
/** Cells in one routing table. */
export const CELLS_MAX = 256;
/** Replicas listed for one cell (Raft groups of 3-7, plus room for a membership change). */
export const REPLICAS_PER_CELL_MAX = 16;

assert(CELLS_MAX <= ROUTES_MAX, 'every cell can hold a namespace');

export type RouteState = 'active' | 'moving';

export interface Route {
  readonly namespace: string;
  readonly cell: string;
  readonly state: RouteState;
}

export interface CellAddresses {
  readonly id: string;
  /** host:port of each replica's gRPC listener. */
  readonly replicas: readonly string[];
}

export interface RoutingTable {
  readonly version: number;
  readonly cells: ReadonlyMap<string, CellAddresses>;
  readonly routes: ReadonlyMap<string, Route>;
}

/** The contract's Routing object, as GET /v1/routing answers it. */
export interface RoutingObject {
  readonly version: number;
  readonly routes: Route[];
}

/** A routing file: the Routing object plus the cells' replica addresses. */
export interface RoutingFileObject extends RoutingObject {
  readonly cells: { readonly id: string; readonly replicas: string[] }[];
}

export const EMPTY_TABLE: RoutingTable = { version: 0, cells: new Map(), routes: new Map() };

/** A table, or part of one, that a router cannot route by; the message names where and why. */
export class RoutingFormatError extends Error {
  override readonly name = 'RoutingFormatError';
}

const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;
const CELL_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** host:port, the host a name, an IPv4 address or a bracketed IPv6 address: how replicas and listeners are written. */
export function isHostPort(address: string): boolean {
  return HOST_PORT.test(address);
}

export function isCellId(id: string): boolean {
  return CELL_ID.test(id);
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function parseRoute(r: unknown, at: string): Route {
  if (!isObject(r)) throw new RoutingFormatError(`${at} is not an object`);
  const { namespace, cell, state } = r;
  if (typeof namespace !== 'string' || !isValidNamespace(namespace))
    throw new RoutingFormatError(`${at}.namespace is not a valid namespace`);
  if (typeof cell !== 'string' || !isCellId(cell)) throw new RoutingFormatError(`${at}.cell must be a cell id of [A-Za-z0-9._-]`);
  const s = state ?? 'active';
  if (s !== 'active' && s !== 'moving') throw new RoutingFormatError(`${at}.state must be "active" or "moving"`);
  return { namespace, cell, state: s };
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
    const route = parseRoute(r, `${where}: routes[${i}]`);
    if (out.has(route.namespace)) throw new RoutingFormatError(`${where}: namespace "${route.namespace}" is routed twice`);
    out.set(route.namespace, route);
  });
  return { version, routes: out };
}

function parseCell(c: unknown, at: string): CellAddresses {
  if (!isObject(c) || typeof c.id !== 'string' || !isCellId(c.id))
    throw new RoutingFormatError(`${at}.id must be a cell id of [A-Za-z0-9._-]`);
  if (!Array.isArray(c.replicas) || c.replicas.length === 0 || c.replicas.length > REPLICAS_PER_CELL_MAX)
    throw new RoutingFormatError(`${at}.replicas must list 1-${REPLICAS_PER_CELL_MAX} host:port addresses`);
  const replicas = c.replicas.map((r: unknown, j) => {
    // GET /v1/fleet lists replicas as objects whose gRPC address is `grpc`; a routing file as plain strings.
    const a = typeof r === 'string' ? r : isObject(r) ? r.grpc : undefined;
    if (typeof a !== 'string' || !isHostPort(a)) throw new RoutingFormatError(`${at}.replicas[${j}] is not host:port`);
    return a;
  });
  return { id: c.id, replicas };
}

/** Cells with replica addresses: the routing file's `cells`, or GET /v1/fleet's `cells[].replicas[].grpc`. */
export function parseCells(cells: unknown, where: string): Map<string, CellAddresses> {
  if (!Array.isArray(cells)) throw new RoutingFormatError(`${where}: "cells" must be an array`);
  if (cells.length > CELLS_MAX) throw new RoutingFormatError(`${where}: more than ${CELLS_MAX} cells`);
  const out = new Map<string, CellAddresses>();
  cells.forEach((c: unknown, i) => {
    const cell = parseCell(c, `${where}: cells[${i}]`);
    out.set(cell.id, cell);
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

/** The contract's Routing object for a version and its routes, in the order given. */
export function routingObject(version: number, routes: Iterable<Route>): RoutingObject {
  return { version, routes: [...routes].map((r) => ({ namespace: r.namespace, cell: r.cell, state: r.state })) };
}

/** The JSON text of a table as a routing file holds it: routes sorted by namespace, so a rewrite diffs cleanly. */
export function routingFileJson(t: RoutingTable): string {
  const routes = [...t.routes.values()].sort((a, b) => (a.namespace < b.namespace ? -1 : 1));
  const body: RoutingFileObject = {
    version: t.version,
    cells: [...t.cells.values()].map((c) => ({ id: c.id, replicas: [...c.replicas] })),
    routes: routingObject(t.version, routes).routes,
  };
  return `${JSON.stringify(body, null, 2)}\n`;
}

/** What placement weighs of one cell: its id and, where its replicas report it, its live sessions. */
export interface CellLoad {
  readonly id: string;
  /** Live sessions on the cell; absent (0) where nobody polls the cells (a router with a routing file). */
  readonly sessions?: number;
}

/** How many namespaces the routes place on each cell. */
export function namespacesPerCell(routes: Iterable<{ readonly cell: string }>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of routes) counts.set(r.cell, (counts.get(r.cell) ?? 0) + 1);
  return counts;
}

/**
 * Where a new tenant goes, for the control plane and for a router's
 * auto-tenants alike: the cell with the fewest live sessions, then the
 * fewest namespaces, then the smallest id (so every caller given the same
 * view picks the same cell). Undefined when there is no cell.
 */
export function leastLoadedCell(cells: Iterable<CellLoad>, namespaces: ReadonlyMap<string, number>): string | undefined {
  let best: { id: string; sessions: number; namespaces: number } | undefined;
  for (const c of cells) {
    const candidate = { id: c.id, sessions: c.sessions ?? 0, namespaces: namespaces.get(c.id) ?? 0 };
    assert(candidate.sessions >= 0 && candidate.namespaces >= 0, 'loads are counts');
    if (best === undefined || lighter(candidate, best)) best = candidate;
  }
  return best?.id;
}

function lighter(
  a: { id: string; sessions: number; namespaces: number },
  b: { id: string; sessions: number; namespaces: number },
): boolean {
  if (a.sessions !== b.sessions) return a.sessions < b.sessions;
  if (a.namespaces !== b.namespaces) return a.namespaces < b.namespaces;
  return a.id < b.id;
}
