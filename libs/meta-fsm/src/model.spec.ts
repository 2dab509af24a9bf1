/**
 * Goal: the meta state machine keeps its promises (tenants, routes, a routing
 * version that only grows, one unfinished move per namespace, forward-only
 * move and snapshot states, snapshot records forgotten only once finished,
 * Idempotency-Key answers, limits), checked against
 * a small, obviously-correct reference model.
 * Method: fast-check model-based testing (fc.commands + fc.modelRun) over 3
 * namespaces, 3 cells, 3 move ids, 2 snapshot ids and 3 idempotency keys, with
 * small limits so eviction and QUOTA_EXCEEDED happen, and snapshot-and-restore
 * steps. After every command the outcome's ok/code, every tenant's cell,
 * the routes and the routing version must match the model, and the real
 * machine's invariants must hold. META_FSM_MODEL_RUNS overrides the run count.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MetaStateMachine, MOVE_STATES, isMetaFailure, type MetaCommand, type MetaEntry, type MoveState } from './index.js';

const NS = ['a', 'b', 'c'] as const;
const CELLS = ['cell-1', 'cell-2', 'cell-3'] as const;
const RUNS = Number(process.env['META_FSM_MODEL_RUNS'] ?? 2_000);
const LIMITS = { tenantsMax: 2, movesMax: 2, snapshotsMax: 2, idempotencyKeysMax: 2, tokenHashesPerTenantMax: 2 };

interface ModelMove {
  id: string;
  ns: string;
  from: string;
  to: string;
  state: MoveState;
  rollingBack?: boolean;
}
interface Model {
  tenants: Map<string, { cell: string; quotas: Record<string, number> }>;
  routes: Map<string, { cell: string; state: 'active' | 'moving' }>;
  version: number;
  moves: Map<string, ModelMove>;
  snapshots: Map<string, 'uploading' | 'done' | 'failed'>;
  idem: Map<string, { fp: string; result: string }>;
}
interface Real {
  fsm: MetaStateMachine;
  index: number;
}

const finished = (s: MoveState): boolean => s === 'done' || s === 'failed';
const switched = (s: MoveState): boolean => s === 'switching' || s === 'cleaning' || s === 'done';

/** The model's answer to a command: 'ok' or the failure code; it changes the model only on 'ok'. */
function modelApply(m: Model, c: MetaCommand): string {
  const evict = <T>(map: Map<string, T>, max: number, done: (v: T) => boolean): boolean => {
    if (map.size < max) return true;
    for (const [k, v] of map) if (done(v)) return map.delete(k);
    return false;
  };
  switch (c.kind) {
    case 'CreateTenant':
      if (m.tenants.has(c.namespace)) return 'TENANT_EXISTS';
      if (m.tenants.size >= LIMITS.tenantsMax) return 'QUOTA_EXCEEDED';
      m.tenants.set(c.namespace, { cell: c.cell, quotas: { ...(c.quotas as Record<string, number>) } });
      m.routes.set(c.namespace, { cell: c.cell, state: 'active' });
      m.version++;
      return 'ok';
    case 'UpdateTenant': {
      const t = m.tenants.get(c.namespace);
      if (!t) return 'TENANT_NOT_FOUND';
      t.quotas = { ...t.quotas, ...(c.quotas as Record<string, number>) };
      return 'ok';
    }
    case 'DeleteTenant':
      if (!m.tenants.has(c.namespace)) return 'TENANT_NOT_FOUND';
      if ([...m.moves.values()].some((mv) => mv.ns === c.namespace && !finished(mv.state))) return 'MOVE_IN_PROGRESS';
      m.tenants.delete(c.namespace);
      m.routes.delete(c.namespace);
      m.version++;
      return 'ok';
    case 'RotateToken':
      return m.tenants.has(c.namespace) ? 'ok' : 'TENANT_NOT_FOUND';
    case 'StartMove': {
      const t = m.tenants.get(c.namespace);
      if (!t) return 'TENANT_NOT_FOUND';
      if (m.moves.has(c.id)) return 'INVALID_REQUEST';
      if ([...m.moves.values()].some((mv) => mv.ns === c.namespace && !finished(mv.state))) return 'MOVE_IN_PROGRESS';
      if (t.cell === c.toCell) return 'ALREADY_THERE';
      if (!evict(m.moves, LIMITS.movesMax, (mv) => finished(mv.state))) return 'QUOTA_EXCEEDED';
      m.moves.set(c.id, { id: c.id, ns: c.namespace, from: t.cell, to: c.toCell, state: 'queued' });
      return 'ok';
    }
    case 'AdvanceMove': {
      const mv = m.moves.get(c.id);
      if (!mv) return 'MOVE_NOT_FOUND';
      if (finished(mv.state) || MOVE_STATES.indexOf(c.state) <= MOVE_STATES.indexOf(mv.state)) return 'INVALID_REQUEST';
      if (c.state === 'failed' && switched(mv.state)) return 'INVALID_REQUEST';
      if (mv.rollingBack === true && c.state !== 'failed') return 'INVALID_REQUEST';
      mv.state = c.state;
      const cell = switched(c.state) ? mv.to : mv.from;
      const state = c.state === 'freezing' || c.state === 'copying' ? 'moving' : 'active';
      const r = m.routes.get(mv.ns)!;
      if (r.cell !== cell || r.state !== state) {
        m.routes.set(mv.ns, { cell, state });
        m.tenants.get(mv.ns)!.cell = cell;
        m.version++;
      }
      return 'ok';
    }
    case 'RollBackMove': {
      const mv = m.moves.get(c.id);
      if (!mv) return 'MOVE_NOT_FOUND';
      if (finished(mv.state) || switched(mv.state)) return 'INVALID_REQUEST';
      mv.rollingBack = true;
      return 'ok';
    }
    case 'RecordSnapshot':
      if (m.snapshots.has(c.id)) return 'INVALID_REQUEST';
      if (!evict(m.snapshots, LIMITS.snapshotsMax, (s) => s !== 'uploading')) return 'QUOTA_EXCEEDED';
      m.snapshots.set(c.id, 'uploading');
      return 'ok';
    case 'FinishSnapshot': {
      const s = m.snapshots.get(c.id);
      if (s === undefined) return 'SNAPSHOT_NOT_FOUND';
      if (s !== 'uploading') return 'INVALID_REQUEST';
      m.snapshots.set(c.id, c.state);
      return 'ok';
    }
    case 'DeleteSnapshot': {
      const s = m.snapshots.get(c.id);
      if (s === undefined) return 'SNAPSHOT_NOT_FOUND';
      if (s === 'uploading') return 'INVALID_REQUEST';
      m.snapshots.delete(c.id);
      return 'ok';
    }
  }
}

function modelApplyEntry(m: Model, e: MetaEntry): string {
  if (!e.idempotency) return modelApply(m, e.command);
  const seen = m.idem.get(e.idempotency.key);
  if (seen) return seen.fp === e.idempotency.fingerprint ? seen.result : 'IDEMPOTENCY_KEY_REUSED';
  const result = modelApply(m, e.command);
  m.idem.set(e.idempotency.key, { fp: e.idempotency.fingerprint, result });
  if (m.idem.size > LIMITS.idempotencyKeysMax) m.idem.delete(m.idem.keys().next().value!);
  return result;
}

class ApplyCmd implements fc.Command<Model, Real> {
  constructor(readonly entry: MetaEntry) {}
  check(): boolean {
    return true;
  }
  run(m: Model, r: Real): void {
    const versionBefore = r.fsm.routingVersion;
    const expected = modelApplyEntry(m, this.entry);
    const applied = r.fsm.apply(++r.index, this.entry);
    const got = isMetaFailure(applied.outcome) ? applied.outcome.code : 'ok';
    expect(got).toBe(expected);
    expect(r.fsm.routingVersion).toBeGreaterThanOrEqual(versionBefore);
    expect(r.fsm.routingVersion).toBe(m.version);
    expect(r.fsm.routes().map((x) => [x.namespace, x.cell, x.state])).toEqual(
      [...m.routes.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([ns, x]) => [ns, x.cell, x.state]),
    );
    for (const ns of NS) {
      const t = r.fsm.tenant(ns);
      const mt = m.tenants.get(ns);
      expect(t?.cell).toBe(mt?.cell);
      if (mt) expect(t?.quotas).toEqual(mt.quotas);
      expect(t ? t.tokenHashes.length : 0).toBeLessThanOrEqual(LIMITS.tokenHashesPerTenantMax);
    }
    expect(r.fsm.moves().map((x) => [x.id, x.state])).toEqual([...m.moves.values()].map((x) => [x.id, x.state]));
    expect(r.fsm.snapshotRecords().map((x) => [x.id, x.state])).toEqual([...m.snapshots.entries()]);
    r.fsm.assertInvariants();
  }
  toString(): string {
    return JSON.stringify(this.entry);
  }
}

class RestoreCmd implements fc.Command<Model, Real> {
  check(): boolean {
    return true;
  }
  run(_m: Model, r: Real): void {
    const bytes = r.fsm.snapshot();
    r.fsm = MetaStateMachine.restore(bytes, LIMITS);
    expect(r.fsm.snapshot()).toEqual(bytes);
  }
  toString(): string {
    return 'restore';
  }
}

const ns = fc.constantFrom(...NS);
const cell = fc.constantFrom(...CELLS);
const at = fc.integer({ min: 0, max: 1000 });
const quotas = fc.record({ maxLocks: fc.integer({ min: 1, max: 9 }), maxSessions: fc.integer({ min: 1, max: 9 }) }, { requiredKeys: [] });
const command: fc.Arbitrary<MetaCommand> = fc.oneof(
  fc.record({ kind: fc.constant('CreateTenant' as const), namespace: ns, cell, quotas, atMs: at }),
  fc.record({ kind: fc.constant('UpdateTenant' as const), namespace: ns, quotas }),
  fc.record({ kind: fc.constant('DeleteTenant' as const), namespace: ns }),
  fc.record({
    kind: fc.constant('RotateToken' as const),
    namespace: ns,
    tokenHash: fc.constantFrom('h1', 'h2', 'h3'),
    graceMs: fc.constantFrom(0, 10),
    atMs: at,
  }),
  fc.record({ kind: fc.constant('StartMove' as const), id: fc.constantFrom('m1', 'm2', 'm3'), namespace: ns, toCell: cell, atMs: at }),
  fc.record({
    kind: fc.constant('AdvanceMove' as const),
    id: fc.constantFrom('m1', 'm2', 'm3'),
    state: fc.constantFrom(...MOVE_STATES),
    atMs: at,
  }),
  fc.record({
    kind: fc.constant('RollBackMove' as const),
    id: fc.constantFrom('m1', 'm2', 'm3'),
    error: fc.constant('rolled back'),
    atMs: at,
  }),
  fc.record({ kind: fc.constant('RecordSnapshot' as const), id: fc.constantFrom('s1', 's2', 's3'), cell, atMs: at }),
  fc.record({
    kind: fc.constant('FinishSnapshot' as const),
    id: fc.constantFrom('s1', 's2', 's3'),
    state: fc.constantFrom('done' as const, 'failed' as const),
  }),
  fc.record({ kind: fc.constant('DeleteSnapshot' as const), id: fc.constantFrom('s1', 's2', 's3') }),
);
const entry: fc.Arbitrary<MetaEntry> = fc.record(
  { command, idempotency: fc.record({ key: fc.constantFrom('k1', 'k2', 'k3'), fingerprint: fc.constantFrom('f1', 'f2') }) },
  { requiredKeys: ['command'] },
);

describe('meta state machine against its reference model', () => {
  it(`matches the model over ${RUNS} random histories`, () => {
    fc.assert(
      fc.property(fc.commands([entry.map((e) => new ApplyCmd(e)), fc.constant(new RestoreCmd())], { maxCommands: 60 }), (cmds) => {
        const model: Model = { tenants: new Map(), routes: new Map(), version: 0, moves: new Map(), snapshots: new Map(), idem: new Map() };
        fc.modelRun(() => ({ model, real: { fsm: new MetaStateMachine(LIMITS), index: 0 } }), cmds);
      }),
      { numRuns: RUNS },
    );
  });

  it('refuses bad fields as outcomes, never by throwing, and leaves the state as it was', () => {
    const fsm = new MetaStateMachine();
    const before = fsm.snapshot();
    const bad: MetaCommand[] = [
      { kind: 'CreateTenant', namespace: '-x', cell: 'c', atMs: 0 },
      { kind: 'CreateTenant', namespace: 'x', cell: '', atMs: 0 },
      { kind: 'CreateTenant', namespace: 'x', cell: 'c', atMs: -1 },
      { kind: 'CreateTenant', namespace: 'x', cell: 'c', atMs: 0, quotas: { maxLocks: 0 } },
      { kind: 'CreateTenant', namespace: 'x', cell: 'c', atMs: 0, quotas: { nope: 1 } as never },
      { kind: 'CreateTenant', namespace: 'x', cell: 'c', atMs: 0, owner: 'o'.repeat(257) },
      { kind: 'UpdateTenant', namespace: 'x', quotas: {} },
      { kind: 'AdvanceMove', id: 'm', state: 'done', atMs: 0 },
      { kind: 'FinishSnapshot', id: 's', state: 'done' },
    ];
    let index = 0;
    for (const c of bad) expect(isMetaFailure(fsm.apply(++index, { command: c }).outcome)).toBe(true);
    expect(fsm.apply(++index, { command: { kind: 'DeleteTenant', namespace: 'x' } }).outcome).toMatchObject({
      ok: false,
      code: 'TENANT_NOT_FOUND',
    });
    // Only the applied index moved.
    expect(JSON.parse(new TextDecoder().decode(fsm.snapshot())).tenants).toEqual(JSON.parse(new TextDecoder().decode(before)).tenants);
    expect(fsm.routingVersion).toBe(0);
  });
});
