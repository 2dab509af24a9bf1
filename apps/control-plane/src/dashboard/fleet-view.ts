/**
 * The dashboard's `fleet` event as data: built from the meta group's state
 * (read after a ReadIndex barrier by the caller), the cells as last polled,
 * and the per-namespace counts the cells' admin ListNamespaces last gave,
 * then narrowed to what a token may see.
 */
import type { CellRow, FleetEvent, Health, MoveRow, ReplicaRow, SnapshotRow, TenantRow, Usage } from '@fencer/dashboard-ui';
import type { MetaStateMachine, Move, SnapshotRecord } from '@fencer/meta-fsm';
import type { CellView, ReplicaView } from '../cells.js';

/** A follower this far behind its leader's log shows amber. */
const LAG_ENTRIES_DEGRADED = 1_000;
/** A replica that has not answered the Status poll for this long shows amber (it is unreachable once a poll fails). */
const SILENT_MS_DEGRADED = 5_000;

export type Scope = FleetEvent['scope'];

function replicaHealth(r: ReplicaView): Health {
  if (r.role === 'unreachable') return 'down';
  if ((r.lag ?? 0) >= LAG_ENTRIES_DEGRADED || (r.lastSeenMs ?? 0) >= SILENT_MS_DEGRADED || r.role === 'candidate') return 'degraded';
  return 'ok';
}

/** No leader: down. A leader with any replica not ok, or a leader change in the last hour: degraded. */
function cellHealth(leader: string | null, replicas: readonly ReplicaRow[]): Health {
  if (leader === null) return 'down';
  return replicas.every((r) => r.health === 'ok') ? 'ok' : 'degraded';
}

function cellRows(state: MetaStateMachine, cells: readonly CellView[]): CellRow[] {
  const namespacesOf = new Map<string, string[]>();
  for (const r of state.routes()) namespacesOf.set(r.cell, [...(namespacesOf.get(r.cell) ?? []), r.namespace]);
  return cells.map((c) => {
    const replicas = c.replicas.map((r): ReplicaRow => ({ ...withoutGrpc(r), health: replicaHealth(r) }));
    return {
      id: c.id,
      leader: c.leader,
      ...(c.term !== undefined ? { term: c.term } : {}),
      leaderChangesLastHour: c.leaderChangesLastHour,
      namespaces: namespacesOf.get(c.id) ?? [],
      replicas,
      health: cellHealth(c.leader, replicas),
    };
  });
}

function withoutGrpc(r: ReplicaView): Omit<ReplicaView, 'grpc'> {
  const { grpc: _grpc, ...rest } = r;
  return rest;
}

function tenantRows(state: MetaStateMachine, usage: ReadonlyMap<string, Usage>): TenantRow[] {
  return state.tenants().map((t) => {
    const u = usage.get(`${t.cell}/${t.namespace}`);
    return {
      namespace: t.namespace,
      cell: t.cell,
      ...(t.owner !== undefined ? { owner: t.owner } : {}),
      moving: state.isMoving(t.namespace),
      quotas: t.quotas,
      ...(u !== undefined ? { usage: u } : {}),
    };
  });
}

function moveRow(m: Move): MoveRow {
  return {
    id: m.id,
    namespace: m.namespace,
    fromCell: m.fromCell,
    toCell: m.toCell,
    state: m.state,
    createdAtMs: m.createdAtMs,
    ...(m.finishedAtMs !== undefined ? { finishedAtMs: m.finishedAtMs } : {}),
    ...(m.sessions !== undefined ? { sessions: m.sessions } : {}),
    ...(m.locks !== undefined ? { locks: m.locks } : {}),
    ...(m.unavailableMs !== undefined ? { unavailableMs: m.unavailableMs } : {}),
    ...(m.error !== undefined ? { error: m.error } : {}),
  };
}

/** The newest snapshot record of each cell (records are kept in creation order). */
function lastSnapshots(records: readonly SnapshotRecord[]): SnapshotRow[] {
  const last = new Map<string, SnapshotRecord>();
  for (const s of records) last.set(s.cell, s);
  return [...last.values()].map((s) => ({
    cell: s.cell,
    id: s.id,
    state: s.state,
    createdAtMs: s.createdAtMs,
    ...(s.index !== undefined ? { index: s.index } : {}),
    ...(s.bytes !== undefined ? { bytes: s.bytes } : {}),
    ...(s.error !== undefined ? { error: s.error } : {}),
  }));
}

export interface FleetInputs {
  readonly state: MetaStateMachine;
  readonly cells: readonly CellView[];
  readonly usage: ReadonlyMap<string, Usage>;
  readonly instance: FleetEvent['instance'];
  readonly atMs: number;
}

/** Everything, as the admin sees it. Moves newest first. */
export function fleetEvent(inputs: FleetInputs): FleetEvent {
  const { state } = inputs;
  return {
    scope: { admin: true },
    instance: inputs.instance,
    atMs: inputs.atMs,
    routingVersion: state.routingVersion,
    cells: cellRows(state, inputs.cells),
    tenants: tenantRows(state, inputs.usage),
    moves: state.moves().map(moveRow).reverse(),
    snapshots: lastSnapshots(state.snapshotRecords()),
  };
}

/** What a tenant token sees: its tenant, its moves and its cell's snapshots; no fleet (GET /v1/fleet is admin-only). */
export function narrowed(event: FleetEvent, scope: Scope): FleetEvent {
  if (scope.admin) return event;
  const tenant = event.tenants.find((t) => t.namespace === scope.namespace);
  return {
    ...event,
    scope,
    cells: [],
    tenants: tenant ? [tenant] : [],
    moves: event.moves.filter((m) => m.namespace === scope.namespace),
    snapshots: event.snapshots.filter((s) => s.cell === tenant?.cell),
  };
}
