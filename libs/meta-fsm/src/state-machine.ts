/**
 * The meta state machine: tenants and their quotas and token hashes, the
 * routing table namespace → cell with a version that only grows, the move
 * journal and the snapshot catalogue. Every control-plane instance of a meta
 * group applies the same entries in the same order and so holds the same
 * state (pattern: @fencer/lock-fsm).
 *
 * apply() never throws on a bad field: it returns a MetaFailure value, the
 * same on every replica. It throws only on a bug (an AssertionError).
 * Writes that carry an Idempotency-Key remember their outcome, replicated, so
 * a retry on a new leader still gets the first answer.
 */
import { assert } from '@fencer/base';
import type { MetaCommand, MetaEntry } from './commands.js';
import { asciiBytes, asciiJson, asciiText } from './commands.js';
import {
  CELL_ID_CHARS_MAX,
  FINGERPRINT_CHARS_MAX,
  IDEMPOTENCY_KEY_CHARS_MAX,
  META_LIMITS,
  NOTE_CHARS_MAX,
  OWNER_CHARS_MAX,
  RECORD_ID_CHARS_MAX,
  TENANT_NAME_PATTERN,
  TOKEN_HASH_CHARS_MAX,
  checkMetaLimits,
  type MetaLimits,
} from './limits.js';
import {
  MOVE_FIGURES,
  MOVE_STATES,
  type MoveFigure,
  type MetaErrorCode,
  type MetaFailure,
  type Move,
  type MoveState,
  type Quotas,
  type Route,
  type SnapshotRecord,
  type Tenant,
} from './types.js';

export type MetaOutcome =
  | { readonly ok: true; readonly tenant: Tenant; readonly routingVersion: number }
  | { readonly ok: true; readonly move: Move; readonly routingVersion: number }
  | { readonly ok: true; readonly snapshot: SnapshotRecord }
  | { readonly ok: true }
  | MetaFailure;

export interface MetaApplied {
  readonly index: number;
  readonly outcome: MetaOutcome;
  /** The outcome is the remembered answer of an earlier write with the same Idempotency-Key and request. */
  readonly replayed: boolean;
}

interface IdempotencyRecord {
  readonly fingerprint: string;
  readonly outcome: MetaOutcome;
}

export const META_SNAPSHOT_FORMAT_VERSION = 1;

function fail(code: MetaErrorCode, detail: string): MetaFailure {
  return { ok: false, code, detail };
}

export function isMetaFailure(o: unknown): o is MetaFailure {
  return typeof o === 'object' && o !== null && (o as { ok?: unknown }).ok === false;
}

function isText(v: unknown, max: number): v is string {
  return typeof v === 'string' && v.length >= 1 && v.length <= max;
}

function isWallMs(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

const QUOTA_KEYS = ['maxSessions', 'maxLocks', 'maxWaiters', 'acquiresPerSecond'] as const;

/** The quotas with their keys in one order (so every replica serialises them alike), or why they are bad. */
function checkQuotas(q: unknown): Quotas | string {
  if (typeof q !== 'object' || q === null || Array.isArray(q)) return 'quotas must be an object';
  for (const k of Object.keys(q)) if (!(QUOTA_KEYS as readonly string[]).includes(k)) return `unknown quota "${k}"`;
  const out: Record<string, number> = {};
  for (const k of QUOTA_KEYS) {
    const v = (q as Record<string, unknown>)[k];
    if (v === undefined) continue;
    const good =
      k === 'acquiresPerSecond' ? typeof v === 'number' && Number.isFinite(v) && v >= 0 : Number.isSafeInteger(v) && (v as number) >= 1;
    if (!good) return `quota ${k} must be ${k === 'acquiresPerSecond' ? 'a number >= 0' : 'an integer >= 1'}`;
    out[k] = v as number;
  }
  return out;
}

const moveRank = (s: MoveState): number => MOVE_STATES.indexOf(s);
const moveFinished = (m: Move): boolean => m.state === 'done' || m.state === 'failed';
/** From 'switching' on, the route points at the target: the move only goes forward (docs/decisions/0011-moves-are-journaled-steps.md). */
const moveSwitched = (s: MoveState): boolean => s === 'switching' || s === 'cleaning' || s === 'done';

export class MetaStateMachine {
  readonly limits: MetaLimits;
  private readonly tenantsByName = new Map<string, Tenant>();
  private readonly routesByName = new Map<string, Route>();
  private readonly movesById = new Map<string, Move>();
  private readonly snapshotsById = new Map<string, SnapshotRecord>();
  private readonly idempotency = new Map<string, IdempotencyRecord>();
  private routingVersionValue = 0;
  private appliedIndexValue = 0;

  constructor(limits: Partial<MetaLimits> = {}) {
    this.limits = { ...META_LIMITS, ...limits };
    checkMetaLimits(this.limits);
  }

  get appliedIndex(): number {
    return this.appliedIndexValue;
  }

  /** Grows by one with every change of the routing table, never goes back. */
  get routingVersion(): number {
    return this.routingVersionValue;
  }

  apply(index: number, entry: MetaEntry): MetaApplied {
    assert(
      Number.isSafeInteger(index) && index > this.appliedIndexValue,
      `entries apply in log order: ${index} after ${this.appliedIndexValue}`,
    );
    this.appliedIndexValue = index;
    const idem = entry.idempotency;
    if (idem !== undefined) {
      if (!isText(idem.key, IDEMPOTENCY_KEY_CHARS_MAX) || !isText(idem.fingerprint, FINGERPRINT_CHARS_MAX)) {
        return {
          index,
          outcome: fail('INVALID_REQUEST', `Idempotency-Key must be 1..${IDEMPOTENCY_KEY_CHARS_MAX} characters`),
          replayed: false,
        };
      }
      const seen = this.idempotency.get(idem.key);
      if (seen !== undefined) {
        if (seen.fingerprint === idem.fingerprint) return { index, outcome: seen.outcome, replayed: true };
        return {
          index,
          outcome: fail('IDEMPOTENCY_KEY_REUSED', `Idempotency-Key "${idem.key}" was used before with another request; use a new key`),
          replayed: false,
        };
      }
    }
    const versionBefore = this.routingVersionValue;
    const outcome = this.applyCommand(entry.command);
    assert(this.routingVersionValue >= versionBefore, 'the routing version never goes back');
    if (idem !== undefined) this.remember(idem.key, { fingerprint: idem.fingerprint, outcome });
    return { index, outcome, replayed: false };
  }

  private remember(key: string, record: IdempotencyRecord): void {
    this.idempotency.set(key, record);
    // Oldest first: Map iterates in insertion order, the same on every replica.
    for (const k of this.idempotency.keys()) {
      if (this.idempotency.size <= this.limits.idempotencyKeysMax) break;
      this.idempotency.delete(k);
    }
  }

  private applyCommand(c: MetaCommand): MetaOutcome {
    switch (c.kind) {
      case 'CreateTenant':
        return this.createTenant(c);
      case 'UpdateTenant':
        return this.updateTenant(c.namespace, c.quotas);
      case 'DeleteTenant':
        return this.deleteTenant(c.namespace);
      case 'RotateToken':
        return this.rotateToken(c.namespace, c.tokenHash, c.graceMs, c.atMs);
      case 'StartMove':
        return this.startMove(c.id, c.namespace, c.toCell, c.atMs);
      case 'AdvanceMove':
        return this.advanceMove(c);
      case 'RollBackMove':
        return this.rollBackMove(c.id, c.error, c.atMs);
      case 'RecordSnapshot':
        return this.recordSnapshot(c.id, c.cell, c.atMs);
      case 'FinishSnapshot':
        return this.finishSnapshot(c);
      case 'DeleteSnapshot':
        return this.deleteSnapshot(c.id);
    }
  }

  // ------------------------------------------------------------- tenants

  private createTenant(c: Extract<MetaCommand, { kind: 'CreateTenant' }>): MetaOutcome {
    if (typeof c.namespace !== 'string' || !TENANT_NAME_PATTERN.test(c.namespace)) {
      return fail('INVALID_REQUEST', 'namespace must be a letter or digit followed by up to 62 letters, digits, ".", "_" or "-"');
    }
    if (!isText(c.cell, CELL_ID_CHARS_MAX)) return fail('INVALID_REQUEST', `cell must be 1..${CELL_ID_CHARS_MAX} characters`);
    if (c.owner !== undefined && (typeof c.owner !== 'string' || c.owner.length > OWNER_CHARS_MAX)) {
      return fail('INVALID_REQUEST', `owner must be at most ${OWNER_CHARS_MAX} characters`);
    }
    if (c.tokenHash !== undefined && !isText(c.tokenHash, TOKEN_HASH_CHARS_MAX)) return fail('INVALID_REQUEST', 'bad token hash');
    if (!isWallMs(c.atMs)) return fail('INVALID_REQUEST', 'atMs must be a wall-clock time in ms');
    const quotas = checkQuotas(c.quotas ?? {});
    if (typeof quotas === 'string') return fail('INVALID_REQUEST', quotas);
    if (this.tenantsByName.has(c.namespace))
      return fail('TENANT_EXISTS', `tenant "${c.namespace}" exists; pick another name or delete it first`);
    if (this.tenantsByName.size >= this.limits.tenantsMax) {
      return fail('QUOTA_EXCEEDED', `the fleet holds its maximum of ${this.limits.tenantsMax} tenants; delete one first`);
    }
    const tenant: Tenant = {
      namespace: c.namespace,
      cell: c.cell,
      ...(c.owner !== undefined ? { owner: c.owner } : {}),
      createdAtMs: c.atMs,
      quotas,
      tokenHashes: c.tokenHash !== undefined ? [{ hash: c.tokenHash }] : [],
    };
    this.tenantsByName.set(c.namespace, tenant);
    this.setRoute({ namespace: c.namespace, cell: c.cell, state: 'active' });
    return { ok: true, tenant, routingVersion: this.routingVersionValue };
  }

  private existingTenant(namespace: unknown): Tenant | MetaFailure {
    const tenant = typeof namespace === 'string' ? this.tenantsByName.get(namespace) : undefined;
    return tenant ?? fail('TENANT_NOT_FOUND', `no tenant "${String(namespace)}"`);
  }

  private updateTenant(namespace: string, quotasIn: unknown): MetaOutcome {
    const tenant = this.existingTenant(namespace);
    if (isMetaFailure(tenant)) return tenant;
    const quotas = checkQuotas(quotasIn);
    if (typeof quotas === 'string') return fail('INVALID_REQUEST', quotas);
    const next: Tenant = { ...tenant, quotas: checkQuotas({ ...tenant.quotas, ...quotas }) as Quotas };
    this.tenantsByName.set(namespace, next);
    return { ok: true, tenant: next, routingVersion: this.routingVersionValue };
  }

  private deleteTenant(namespace: string): MetaOutcome {
    const tenant = this.existingTenant(namespace);
    if (isMetaFailure(tenant)) return tenant;
    const moving = this.unfinishedMove(namespace);
    if (moving !== undefined)
      return fail('MOVE_IN_PROGRESS', `tenant "${namespace}" is being moved (move ${moving.id}); wait for it to finish`);
    this.tenantsByName.delete(namespace);
    this.routesByName.delete(namespace);
    this.routingVersionValue++;
    return { ok: true, tenant, routingVersion: this.routingVersionValue };
  }

  private rotateToken(namespace: string, tokenHash: unknown, graceMs: unknown, atMs: unknown): MetaOutcome {
    const tenant = this.existingTenant(namespace);
    if (isMetaFailure(tenant)) return tenant;
    if (!isText(tokenHash, TOKEN_HASH_CHARS_MAX)) return fail('INVALID_REQUEST', 'bad token hash');
    if (!isWallMs(graceMs) || !isWallMs(atMs)) return fail('INVALID_REQUEST', 'graceMs and atMs must be integers >= 0');
    const validUntilMs = atMs + graceMs;
    // The previous hashes keep working through the grace period; expired ones are dropped now.
    const kept = graceMs === 0 ? [] : tenant.tokenHashes.filter((t) => t.validUntilMs === undefined || t.validUntilMs > atMs);
    const previous = kept.map((t) => (t.validUntilMs === undefined ? { hash: t.hash, validUntilMs } : t));
    const tokenHashes = [{ hash: tokenHash }, ...previous].slice(0, this.limits.tokenHashesPerTenantMax);
    this.tenantsByName.set(namespace, { ...tenant, tokenHashes });
    return { ok: true };
  }

  private setRoute(route: Route): void {
    this.routesByName.set(route.namespace, route);
    this.routingVersionValue++;
  }

  // ---------------------------------------------------------------- moves

  private unfinishedMove(namespace: string): Move | undefined {
    for (const m of this.movesById.values()) if (m.namespace === namespace && !moveFinished(m)) return m;
    return undefined;
  }

  /** Forgets the oldest finished record when the map is full; false when every record is still running. */
  private static makeRoom<T>(map: Map<string, T>, max: number, finished: (v: T) => boolean): boolean {
    if (map.size < max) return true;
    for (const [k, v] of map) {
      if (finished(v)) {
        map.delete(k);
        return true;
      }
    }
    return false;
  }

  private startMove(id: unknown, namespace: string, toCell: unknown, atMs: unknown): MetaOutcome {
    if (!isText(id, RECORD_ID_CHARS_MAX)) return fail('INVALID_REQUEST', `move id must be 1..${RECORD_ID_CHARS_MAX} characters`);
    if (!isText(toCell, CELL_ID_CHARS_MAX)) return fail('INVALID_REQUEST', `toCell must be 1..${CELL_ID_CHARS_MAX} characters`);
    if (!isWallMs(atMs)) return fail('INVALID_REQUEST', 'atMs must be a wall-clock time in ms');
    const tenant = this.existingTenant(namespace);
    if (isMetaFailure(tenant)) return tenant;
    if (this.movesById.has(id)) return fail('INVALID_REQUEST', `move id "${id}" is taken`);
    const moving = this.unfinishedMove(namespace);
    if (moving !== undefined) return fail('MOVE_IN_PROGRESS', `tenant "${namespace}" is already being moved (move ${moving.id})`);
    if (tenant.cell === toCell) return fail('ALREADY_THERE', `tenant "${namespace}" is already on cell ${toCell}`);
    if (!MetaStateMachine.makeRoom(this.movesById, this.limits.movesMax, moveFinished)) {
      return fail('QUOTA_EXCEEDED', `the move journal holds its maximum of ${this.limits.movesMax} unfinished moves`);
    }
    const move: Move = {
      id,
      namespace,
      fromCell: tenant.cell,
      toCell,
      state: 'queued',
      createdAtMs: atMs,
      stateAtMs: { queued: atMs },
      journalIndex: this.appliedIndexValue,
    };
    this.movesById.set(id, move);
    return { ok: true, move, routingVersion: this.routingVersionValue };
  }

  private advanceMove(c: Extract<MetaCommand, { kind: 'AdvanceMove' }>): MetaOutcome {
    const { id, state, error, atMs } = c;
    const move = typeof id === 'string' ? this.movesById.get(id) : undefined;
    if (move === undefined) return fail('MOVE_NOT_FOUND', `no move "${String(id)}"`);
    if (!MOVE_STATES.includes(state)) return fail('INVALID_REQUEST', `unknown move state "${String(state)}"`);
    if (!isWallMs(atMs)) return fail('INVALID_REQUEST', 'atMs must be a wall-clock time in ms');
    if (error !== undefined && !isText(error, NOTE_CHARS_MAX))
      return fail('INVALID_REQUEST', `error must be 1..${NOTE_CHARS_MAX} characters`);
    for (const k of MOVE_FIGURES) if (c[k] !== undefined && !isWallMs(c[k])) return fail('INVALID_REQUEST', `${k} must be an integer >= 0`);
    if (moveFinished(move) || moveRank(state) <= moveRank(move.state)) {
      return fail('INVALID_REQUEST', `move ${id} is ${move.state}; its state only moves forward`);
    }
    if (state === 'failed' && moveSwitched(move.state))
      return fail('INVALID_REQUEST', `move ${id} switched its route already; it can only go forward`);
    if (move.rollingBack !== undefined && state !== 'failed')
      return fail('INVALID_REQUEST', `move ${id} is being rolled back (${move.rollingBack}); it can only end failed`);
    const finished = state === 'done' || state === 'failed';
    const figures: Partial<Record<MoveFigure, number>> = {};
    for (const k of MOVE_FIGURES) if (c[k] !== undefined) figures[k] = c[k];
    const next: Move = {
      ...move,
      ...figures,
      state,
      stateAtMs: { ...move.stateAtMs, [state]: atMs },
      ...(finished ? { finishedAtMs: atMs } : {}),
      ...(error !== undefined ? { error } : {}),
      journalIndex: this.appliedIndexValue,
    };
    this.movesById.set(id, next);
    const tenant = this.tenantsByName.get(move.namespace);
    assert(tenant !== undefined, 'a tenant with an unfinished move is never deleted');
    const cell = moveSwitched(state) ? move.toCell : move.fromCell;
    const routeState = finished || moveSwitched(state) ? 'active' : state === 'queued' ? 'active' : 'moving';
    const route = this.routesByName.get(move.namespace);
    if (route?.cell !== cell || route.state !== routeState) {
      this.setRoute({ namespace: move.namespace, cell, state: routeState });
      if (tenant.cell !== cell) this.tenantsByName.set(move.namespace, { ...tenant, cell });
    }
    return { ok: true, move: next, routingVersion: this.routingVersionValue };
  }

  private rollBackMove(id: unknown, error: unknown, atMs: unknown): MetaOutcome {
    const move = typeof id === 'string' ? this.movesById.get(id) : undefined;
    if (move === undefined) return fail('MOVE_NOT_FOUND', `no move "${String(id)}"`);
    if (!isText(error, NOTE_CHARS_MAX)) return fail('INVALID_REQUEST', `error must be 1..${NOTE_CHARS_MAX} characters`);
    if (!isWallMs(atMs)) return fail('INVALID_REQUEST', 'atMs must be a wall-clock time in ms');
    if (moveFinished(move) || moveSwitched(move.state))
      return fail('INVALID_REQUEST', `move ${move.id} is ${move.state}; only a move before its switch rolls back`);
    if (move.rollingBack !== undefined) return { ok: true, move, routingVersion: this.routingVersionValue };
    const next: Move = { ...move, rollingBack: error, journalIndex: this.appliedIndexValue };
    this.movesById.set(move.id, next);
    return { ok: true, move: next, routingVersion: this.routingVersionValue };
  }

  // ------------------------------------------------------------ snapshots

  private recordSnapshot(id: unknown, cell: unknown, atMs: unknown): MetaOutcome {
    if (!isText(id, RECORD_ID_CHARS_MAX)) return fail('INVALID_REQUEST', `snapshot id must be 1..${RECORD_ID_CHARS_MAX} characters`);
    if (!isText(cell, CELL_ID_CHARS_MAX)) return fail('INVALID_REQUEST', `cell must be 1..${CELL_ID_CHARS_MAX} characters`);
    if (!isWallMs(atMs)) return fail('INVALID_REQUEST', 'atMs must be a wall-clock time in ms');
    if (this.snapshotsById.has(id)) return fail('INVALID_REQUEST', `snapshot id "${id}" is taken`);
    if (!MetaStateMachine.makeRoom(this.snapshotsById, this.limits.snapshotsMax, (s) => s.state !== 'uploading')) {
      return fail('QUOTA_EXCEEDED', `the snapshot catalogue holds its maximum of ${this.limits.snapshotsMax} unfinished snapshots`);
    }
    const snapshot: SnapshotRecord = { id, cell, state: 'uploading', createdAtMs: atMs };
    this.snapshotsById.set(id, snapshot);
    return { ok: true, snapshot };
  }

  private finishSnapshot(c: Extract<MetaCommand, { kind: 'FinishSnapshot' }>): MetaOutcome {
    const snapshot = typeof c.id === 'string' ? this.snapshotsById.get(c.id) : undefined;
    if (snapshot === undefined) return fail('SNAPSHOT_NOT_FOUND', `no snapshot "${String(c.id)}"`);
    if (c.state !== 'done' && c.state !== 'failed') return fail('INVALID_REQUEST', 'a snapshot finishes as done or failed');
    if (snapshot.state !== 'uploading') return fail('INVALID_REQUEST', `snapshot ${c.id} is ${snapshot.state} already`);
    for (const k of ['index', 'bytes'] as const)
      if (c[k] !== undefined && !isWallMs(c[k])) return fail('INVALID_REQUEST', `${k} must be an integer >= 0`);
    for (const k of ['sha256', 'location', 'error'] as const) {
      if (c[k] !== undefined && !isText(c[k], NOTE_CHARS_MAX))
        return fail('INVALID_REQUEST', `${k} must be 1..${NOTE_CHARS_MAX} characters`);
    }
    const next: SnapshotRecord = {
      ...snapshot,
      state: c.state,
      ...(c.index !== undefined ? { index: c.index } : {}),
      ...(c.bytes !== undefined ? { bytes: c.bytes } : {}),
      ...(c.sha256 !== undefined ? { sha256: c.sha256 } : {}),
      ...(c.location !== undefined ? { location: c.location } : {}),
      ...(c.error !== undefined ? { error: c.error } : {}),
    };
    this.snapshotsById.set(c.id, next);
    return { ok: true, snapshot: next };
  }

  private deleteSnapshot(id: unknown): MetaOutcome {
    const snapshot = typeof id === 'string' ? this.snapshotsById.get(id) : undefined;
    if (snapshot === undefined) return fail('SNAPSHOT_NOT_FOUND', `no snapshot "${String(id)}"`);
    if (snapshot.state === 'uploading') return fail('INVALID_REQUEST', `snapshot ${snapshot.id} is still uploading`);
    this.snapshotsById.delete(snapshot.id);
    return { ok: true, snapshot };
  }

  // ---------------------------------------------------------------- reads

  tenant(namespace: string): Tenant | undefined {
    return this.tenantsByName.get(namespace);
  }

  /** Tenants by name. */
  tenants(): Tenant[] {
    return [...this.tenantsByName.values()].sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
  }

  /** Routes by namespace. */
  routes(): Route[] {
    return [...this.routesByName.values()].sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
  }

  isMoving(namespace: string): boolean {
    return this.unfinishedMove(namespace) !== undefined;
  }

  move(id: string): Move | undefined {
    return this.movesById.get(id);
  }

  /** Moves, oldest first. */
  moves(): Move[] {
    return [...this.movesById.values()];
  }

  snapshotRecord(id: string): SnapshotRecord | undefined {
    return this.snapshotsById.get(id);
  }

  /** Snapshot records, oldest first. */
  snapshotRecords(): SnapshotRecord[] {
    return [...this.snapshotsById.values()];
  }

  // ------------------------------------------------------------ snapshot

  snapshot(): Uint8Array {
    return asciiBytes(
      asciiJson({
        v: META_SNAPSHOT_FORMAT_VERSION,
        appliedIndex: this.appliedIndexValue,
        routingVersion: this.routingVersionValue,
        tenants: [...this.tenantsByName.values()],
        routes: [...this.routesByName.values()],
        moves: [...this.movesById.values()],
        snapshots: [...this.snapshotsById.values()],
        idempotency: [...this.idempotency.entries()],
      }),
    );
  }

  /** A state machine holding exactly the state of snapshot() bytes; corrupt bytes are an AssertionError. */
  static restore(bytes: Uint8Array, limits: Partial<MetaLimits> = {}): MetaStateMachine {
    const text = asciiText(bytes);
    assert(text !== undefined, 'meta snapshot is ASCII JSON');
    let s: {
      v: number;
      appliedIndex: number;
      routingVersion: number;
      tenants: Tenant[];
      routes: Route[];
      moves: Move[];
      snapshots: SnapshotRecord[];
      idempotency: [string, IdempotencyRecord][];
    };
    try {
      s = JSON.parse(text);
    } catch (e) {
      assert(false, `meta snapshot is not JSON: ${(e as Error).message}`);
    }
    assert(s.v === META_SNAPSHOT_FORMAT_VERSION, `meta snapshot format ${s.v} is ${META_SNAPSHOT_FORMAT_VERSION}`);
    const fsm = new MetaStateMachine(limits);
    fsm.appliedIndexValue = s.appliedIndex;
    fsm.routingVersionValue = s.routingVersion;
    for (const t of s.tenants) fsm.tenantsByName.set(t.namespace, t);
    for (const r of s.routes) fsm.routesByName.set(r.namespace, r);
    for (const m of s.moves) fsm.movesById.set(m.id, m);
    for (const r of s.snapshots) fsm.snapshotsById.set(r.id, r);
    for (const [k, r] of s.idempotency) fsm.idempotency.set(k, r);
    fsm.assertInvariants();
    return fsm;
  }

  /** Every tenant has exactly one route, to its cell; at most one unfinished move per namespace. */
  assertInvariants(): void {
    assert(this.tenantsByName.size === this.routesByName.size, 'one route per tenant');
    for (const [name, t] of this.tenantsByName) {
      const r = this.routesByName.get(name);
      assert(r !== undefined && r.cell === t.cell, `route of ${name} points at its tenant's cell`);
    }
    const moving = new Set<string>();
    for (const m of this.movesById.values()) {
      if (moveFinished(m)) continue;
      assert(!moving.has(m.namespace), `one unfinished move per namespace (${m.namespace})`);
      moving.add(m.namespace);
    }
    assert(this.idempotency.size <= this.limits.idempotencyKeysMax, 'idempotency keys within their limit');
  }
}
