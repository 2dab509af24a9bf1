/**
 * What the control plane sends the page on its event stream: one `fleet`
 * event carrying every view as of a ReadIndex read of the meta group, and,
 * while a tenant is selected, `locks` events carrying that tenant's live
 * locks as Watch on its owning cell keeps them. Types only: the page and
 * the server compile against the same shapes.
 */

/** Event names on the stream (`event:` lines): the views, one tenant's locks, and a problem reading them. */
export type StreamEventName = 'fleet' | 'locks' | 'problem';

export type Health = 'ok' | 'degraded' | 'down';

export interface ReplicaRow {
  readonly id: string;
  readonly role: 'leader' | 'follower' | 'learner' | 'candidate' | 'unreachable';
  readonly term?: number;
  readonly commitIndex?: number;
  readonly appliedIndex?: number;
  /** Entries behind the leader, as the leader last reported it. */
  readonly lag?: number;
  readonly lastSeenMs?: number;
  readonly health: Health;
}

export interface CellRow {
  readonly id: string;
  readonly leader: string | null;
  readonly term?: number;
  readonly leaderChangesLastHour: number;
  readonly namespaces: readonly string[];
  readonly replicas: readonly ReplicaRow[];
  readonly health: Health;
}

export interface Usage {
  readonly sessions: number;
  readonly locks: number;
  readonly waiters: number;
}

export interface TenantRow {
  readonly namespace: string;
  readonly cell: string;
  readonly owner?: string;
  readonly moving: boolean;
  readonly quotas: { readonly maxSessions?: number; readonly maxLocks?: number; readonly maxWaiters?: number };
  /** Absent: the owning cell has not answered since the stream began. */
  readonly usage?: Usage;
}

export interface MoveRow {
  readonly id: string;
  readonly namespace: string;
  readonly fromCell: string;
  readonly toCell: string;
  readonly state: string;
  readonly createdAtMs: number;
  readonly finishedAtMs?: number;
  readonly sessions?: number;
  readonly locks?: number;
  readonly unavailableMs?: number;
  readonly error?: string;
}

export interface SnapshotRow {
  readonly cell: string;
  readonly id: string;
  readonly state: string;
  readonly createdAtMs: number;
  readonly index?: number;
  readonly bytes?: number;
  readonly error?: string;
}

export interface FleetEvent {
  /** Who the token is: the admin (or auth off) sees everything, a tenant its own tenant only. */
  readonly scope: { readonly admin: true } | { readonly admin: false; readonly namespace: string };
  /** This instance's id, and whether it leads the meta group. */
  readonly instance: { readonly id: string; readonly leader: boolean };
  readonly atMs: number;
  readonly routingVersion: number;
  readonly cells: readonly CellRow[];
  readonly tenants: readonly TenantRow[];
  readonly moves: readonly MoveRow[];
  readonly snapshots: readonly SnapshotRow[];
}

export interface HolderRow {
  readonly sessionId: string;
  readonly clientId: string;
  readonly token: number;
  readonly mode: string;
}

export interface WaiterRow {
  readonly sessionId: string;
  readonly clientId: string;
  readonly mode: string;
}

export interface LockRow {
  readonly name: string;
  readonly holders: readonly HolderRow[];
  /** The FIFO queue, head first. */
  readonly waiters: readonly WaiterRow[];
}

export interface LocksEvent {
  readonly namespace: string;
  /** The cell being watched; null while the tenant's cell has no reachable replica or it is unknown. */
  readonly cell: string | null;
  readonly revision: number;
  readonly locks: readonly LockRow[];
  /** Why the list may be stale (the watch is reconnecting), or absent. */
  readonly problem?: string;
}

/** A problem on the stream itself (the meta group unreachable): the views stay as last sent. */
export interface StreamProblem {
  readonly title: string;
  readonly detail: string;
}
