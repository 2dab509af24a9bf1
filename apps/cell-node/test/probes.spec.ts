/**
 * Goal: a cell node's probes on its metrics port, as an orchestrator sees
 * them: /livez answers 200 while the process runs; /readyz answers 200 once
 * the replica follows a leader and has applied what it committed, 503 with a
 * reason while the cell has no leader it can follow (its majority gone), and
 * 200 again once the cell is whole.
 * Method: a real three-replica cell; the probes asked over HTTP; the leader
 * and one follower killed with SIGKILL, the survivor's /readyz awaited until
 * it says not ready; the two restarted from their data and every /readyz
 * awaited until ready. Every wait is event-driven (polling the probe) with a
 * generous timeout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cell, eventually, startCell } from './support/cell.js';

let cell: Cell;
beforeAll(async () => {
  cell = await startCell({ replicas: 3 });
}, 60_000);
afterAll(async () => {
  await cell?.stop();
});

/** GET one probe of a replica: status and body (status 0 when nothing answers). */
async function probe(id: string, path: '/livez' | '/readyz'): Promise<{ status: number; body: string }> {
  const plan = cell.replicas.find((r) => r.id === id)!;
  const url = plan.metrics.replace(/\/metrics$/, path);
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, body: await res.text() };
  } catch {
    return { status: 0, body: '' };
  }
}

/** Waits until `id`'s probe answers what `accept` takes; returns that answer. */
function probeUntil(id: string, path: '/livez' | '/readyz', accept: (r: { status: number; body: string }) => boolean, what: string) {
  return eventually(
    async () => {
      const r = await probe(id, path);
      return accept(r) ? r : undefined;
    },
    60_000,
    `${id} ${path}: ${what}`,
  );
}

async function allReady(): Promise<void> {
  for (const r of cell.replicas) await probeUntil(r.id, '/readyz', (a) => a.status === 200 && a.body === 'ok\n', 'ready');
}

describe('cell-node probes', () => {
  it('every replica is live, and ready once it follows the leader', async () => {
    await cell.leader();
    await allReady();
    for (const r of cell.replicas) expect((await probe(r.id, '/livez')).status).toBe(200);
  }, 90_000);

  it('a replica whose majority is gone is live but not ready, and ready again once the cell is whole', async () => {
    const leader = (await cell.leader()).nodeId;
    const others = cell.replicas.map((r) => r.id).filter((id) => id !== leader);
    const [gone, survivor] = [others[0]!, others[1]!];
    await cell.kill(leader);
    await cell.kill(gone);
    const r = await probeUntil(survivor, '/readyz', (a) => a.status === 503, 'not ready');
    expect(r.body).toMatch(/^no word from the leader|^no leader known/);
    expect((await probe(survivor, '/livez')).status).toBe(200);
    cell.restart(leader);
    cell.restart(gone);
    await cell.leader(60_000);
    await allReady();
  }, 180_000);
});
