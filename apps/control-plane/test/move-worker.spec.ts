/**
 * Goal: the control plane's leader tasks run what the API journals
 * (docs/decisions/0019-the-move-worker.md): a POSTed move reaches `done`
 * with its figures in the contract's Move (sessions, locks, revision,
 * unavailableMs) and the route on the target; a move too large is `failed`
 * before anything froze; a target that stops answering mid-move leaves the
 * namespace frozen only until the move rolls back, then the source serves
 * again; every cell step carries the move's fence (this leader's term, the
 * journal index of the move's state, its id), and a step a cell refuses as
 * fenced ends the pass without failing the move; and a tenant created while
 * its cell had no leader is claimed by the ownership reconciler once the
 * cell answers.
 * Method: the in-process harness (a real one-member meta group under the
 * real app) with its fake cell directory, which models each cell's
 * namespaces and frozen flags; each task's pass is run directly, with an
 * injected wall clock for the frozen-too-long rule.
 */
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MOVE_TIMING } from '@fencer/meta-fsm';
import { moveWorker, ownershipReconciler } from '../src/index.js';
import { call, startHarness, type Harness } from './support/harness.js';

const logger = pino({ level: 'silent' });

let h: Harness;
let nowMs: number;

beforeEach(async () => {
  h = await startHarness();
  nowMs = Date.now();
});
afterEach(async () => h.close());

/** The worker, on the injected wall clock; `tickMs` > 0 advances it at each read (the unavailability's ends are reads of it). */
function worker(pauseBudgetMs = 1_000, tickMs = 0) {
  return moveWorker({
    meta: h.group,
    term: () => h.group.replica.status().term,
    cells: h.cells,
    logger,
    wallMs: () => (nowMs += tickMs),
    pauseBudgetMs,
  });
}

async function tenantWithSessions(namespace: string, sessions: number): Promise<void> {
  const res = await call(h.app, 'POST', '/v1/tenants', { namespace, cell: 'cell-1' });
  expect(res.statusCode).toBe(201);
  h.cells.owned.get('cell-1')!.set(namespace, sessions);
}

async function startMove(namespace: string, toCell: string): Promise<string> {
  const res = await call(h.app, 'POST', '/v1/moves', { namespace, toCell });
  expect(res.statusCode).toBe(202);
  expect(res.json()).toMatchObject({ state: 'queued' });
  return res.json().id as string;
}

async function moveOf(id: string): Promise<Record<string, unknown>> {
  const res = await call(h.app, 'GET', `/v1/moves/${id}`);
  expect(res.statusCode).toBe(200);
  return res.json();
}

describe('the move worker', () => {
  it('fences every cell step with its term and the move’s journal index; a fenced step ends the pass and fails nothing', async () => {
    await tenantWithSessions('pay', 1);
    const id = await startMove('pay', 'cell-2');
    const term = h.group.replica.status().term;
    h.cells.fencedBelowTerm = term + 1;
    await worker().runPass(new AbortController().signal);
    // The freeze was refused as fenced: nothing more was tried, the move is still where the journal had it.
    expect(h.cells.calls.filter((c) => !c.startsWith('claim'))).toEqual(['freeze cell-1 pay']);
    expect(await moveOf(id)).toMatchObject({ state: 'freezing' });
    const journalIndex = h.group.state.move(id)?.journalIndex;
    expect(journalIndex).toBeGreaterThan(0);
    expect(h.cells.fences).toEqual([{ term, journalIndex, moveId: id }]);
    // A cell that no longer fences this term: the next pass carries the move on, each step fenced by the state it came from.
    h.cells.fencedBelowTerm = 0;
    await worker().runPass(new AbortController().signal);
    expect(await moveOf(id)).toMatchObject({ state: 'done' });
    const indexes = h.cells.fences.map((f) => f?.journalIndex ?? -1);
    expect(h.cells.fences.every((f) => f?.term === term && f.moveId === id)).toBe(true);
    expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    expect(new Set(indexes).size).toBeGreaterThan(2);
  });

  it('carries a move to done: freeze, export, import, switch, unfreeze, drop; the figures in the contract’s Move', async () => {
    await tenantWithSessions('pay', 3);
    const id = await startMove('pay', 'cell-2');
    const startedMs = nowMs;
    await worker(1_000, 10).runPass(new AbortController().signal);
    const move = await moveOf(id);
    expect(move).toMatchObject({ state: 'done', sessions: 3, locks: 6, revision: 42 });
    // From the freeze sent to the target's unfreeze (20 ms before it was looked at) and its first write 7 ms after.
    expect(move['unavailableMs']).toBeGreaterThanOrEqual(7);
    expect(move['unavailableMs']).toBeLessThanOrEqual(nowMs - startedMs - 20 + 7);
    expect(move['finishedAt']).toBeDefined();
    expect(h.cells.calls.filter((c) => !c.startsWith('claim'))).toEqual([
      'freeze cell-1 pay',
      'export cell-1 pay',
      'import cell-2 pay',
      'unfreeze cell-2 pay',
      'drop cell-1 pay true',
    ]);
    expect(h.cells.owned.get('cell-1')!.has('pay')).toBe(false);
    expect(h.cells.frozen.size).toBe(0);
    const routing = (await call(h.app, 'GET', '/v1/routing')).json();
    expect(routing.routes).toEqual([{ namespace: 'pay', cell: 'cell-2', state: 'active' }]);
    expect((await call(h.app, 'GET', '/v1/tenants/pay')).json()).toMatchObject({ cell: 'cell-2', moving: false });
  });

  it('polls the target for its first write: a write seen on a later look ends the move in the same pass', async () => {
    await tenantWithSessions('pay', 1);
    const id = await startMove('pay', 'cell-2');
    const realStatus = h.cells.namespaceStatus.bind(h.cells);
    let looks = 0;
    h.cells.namespaceStatus = async (cell, ns, exportSize) => {
      const v = await realStatus(cell, ns, exportSize);
      if (cell !== 'cell-2' || !v.unfrozenHere) return v;
      // The first two looks after the unfreeze see no write yet; the third sees one 130 ms after it.
      looks++;
      return looks < 3 ? { ...v, firstWriteSeen: false, unfrozenAgoMs: 50 * looks } : { ...v, firstWriteAfterMs: 130 };
    };
    await worker(5_000, 10).runPass(new AbortController().signal);
    expect(looks).toBe(3);
    const move = await moveOf(id);
    expect(move).toMatchObject({ state: 'done' });
    expect(move['unavailableMs']).toBeGreaterThanOrEqual(130);
  });

  it('times every step it takes for fencer_cp_move_step_seconds, a journal write under the state it writes, a failed call as failed', async () => {
    await tenantWithSessions('pay', 1);
    await startMove('pay', 'cell-2');
    const steps: string[] = [];
    const realUnfreeze = h.cells.unfreeze.bind(h.cells);
    let refusals = 1;
    h.cells.unfreeze = async (cell, ns, fence) => {
      if (refusals-- > 0) throw new Error('cell-2 has no leader just now');
      return realUnfreeze(cell, ns, fence);
    };
    const timed = moveWorker({
      meta: h.group,
      term: () => h.group.replica.status().term,
      cells: h.cells,
      logger,
      wallMs: () => nowMs,
      pauseBudgetMs: 5_000,
      metrics: {
        moveAdvanced: () => {},
        moveUnavailable: () => {},
        movesInProgress: () => {},
        moveStep: (step, seconds, ok) => {
          expect(seconds).toBeGreaterThanOrEqual(0);
          steps.push(ok ? step : `${step} (failed)`);
        },
      },
    });
    await timed.runPass(new AbortController().signal);
    expect(steps).toEqual([
      'measure-size',
      'journal freezing',
      'freeze-source',
      'journal copying',
      'copy',
      'journal switching',
      'unfreeze-target (failed)',
      'unfreeze-target',
      'journal cleaning',
      'drop-source',
      'first-write',
      'journal done',
    ]);
  });

  it('refuses a move too large for its target before freezing anything', async () => {
    await tenantWithSessions('big', 50);
    h.cells.importBytesMax = 1_000;
    const id = await startMove('big', 'cell-2');
    await worker().runPass(new AbortController().signal);
    const move = await moveOf(id);
    expect(move).toMatchObject({ state: 'failed' });
    expect(move['error']).toMatch(/5000 bytes.*1000 bytes/);
    expect(h.cells.calls.some((c) => c.startsWith('freeze'))).toBe(false);
    expect((await call(h.app, 'GET', '/v1/routing')).json().routes).toEqual([{ namespace: 'big', cell: 'cell-1', state: 'active' }]);
  });

  it('rolls back a move whose target stopped answering once the namespace stayed frozen too long', async () => {
    await tenantWithSessions('pay', 2);
    const id = await startMove('pay', 'cell-2');
    h.cells.down.add('cell-2');
    const w = worker(300);
    await w.runPass(new AbortController().signal);
    // Measuring the target failed: still queued, nothing frozen.
    expect(await moveOf(id)).toMatchObject({ state: 'queued' });
    h.cells.down.delete('cell-2');
    // The target answers the measure, then dies before the copy.
    const realImport = h.cells.importNamespace.bind(h.cells);
    h.cells.importNamespace = async (cell, ns, exported) => {
      h.cells.down.add('cell-2');
      return realImport(cell, ns, exported);
    };
    await w.runPass(new AbortController().signal);
    expect(await moveOf(id)).toMatchObject({ state: 'copying' });
    expect(h.cells.frozen.has('cell-1/pay')).toBe(true);
    expect((await call(h.app, 'GET', '/v1/routing')).json().routes).toEqual([{ namespace: 'pay', cell: 'cell-1', state: 'moving' }]);
    nowMs += MOVE_TIMING.frozenMsMax + 1;
    await w.runPass(new AbortController().signal);
    const move = await moveOf(id);
    expect(move).toMatchObject({ state: 'failed' });
    expect(move['error']).toMatch(/stayed frozen/);
    expect(h.cells.frozen.has('cell-1/pay')).toBe(false);
    expect((await call(h.app, 'GET', '/v1/routing')).json().routes).toEqual([{ namespace: 'pay', cell: 'cell-1', state: 'active' }]);
  });
});

describe('the ownership reconciler', () => {
  it('claims a tenant created while its cell had no leader, once the cell answers, and only then', async () => {
    h.cells.unavailable = true;
    const res = await call(h.app, 'POST', '/v1/tenants', { namespace: 'late', cell: 'cell-2' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'CELL_UNAVAILABLE' });
    const claimed: string[] = [];
    const reconciler = ownershipReconciler({ meta: h.group, cells: h.cells, logger, claimed: (c) => claimed.push(c) });
    await reconciler.runPass(new AbortController().signal);
    expect(h.cells.owned.get('cell-2')!.has('late')).toBe(false);
    h.cells.unavailable = false;
    await reconciler.runPass(new AbortController().signal);
    expect(h.cells.owned.get('cell-2')!.has('late')).toBe(true);
    expect(claimed).toEqual(['cell-2']);
    // Converged: the next pass claims nothing.
    await reconciler.runPass(new AbortController().signal);
    expect(claimed).toEqual(['cell-2']);
  });
});
