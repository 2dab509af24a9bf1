/**
 * Goal: the control plane's view of a real cell (GrpcCellDirectory) is
 * right: ClaimNamespace makes a --managed cell own a namespace (before, the
 * cell refuses it with NAMESPACE_NOT_HERE), DropNamespace refuses a
 * namespace with live sessions unless forced and then tombstones it, and a
 * replica that stops answering shows as `unreachable` with a growing
 * lastSeenMs while the others keep their roles.
 * Method: a real three-replica cell (tools/fleet's startTestCell, --managed),
 * the directory polling every 100 ms, sessions opened with the lock
 * service's OpenSession over gRPC; one replica is SIGSTOPped (and resumed
 * before the cell stops). Waits poll the directory's own view until a
 * deadline, never a fixed sleep standing in for an event.
 */
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';
import { GrpcCellDirectory, type CellView } from '../src/index.js';

let cell: TestCell;
let dir: GrpcCellDirectory;

beforeAll(async () => {
  cell = await startTestCell({ replicas: 3, extraArgs: ['--managed'] });
  dir = new GrpcCellDirectory(
    [{ id: 'cell-1', replicas: cell.replicas.map((r) => ({ id: r.id, grpc: r.grpc, admin: r.admin })) }],
    () => performance.now(),
    100,
  );
}, 120_000);
afterAll(async () => {
  dir?.close();
  await cell?.stop();
}, 60_000);

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** OpenSession on the cell's leader: the session id, or the refusal's lock-reason. */
async function openSession(namespace: string): Promise<{ sessionId?: string; reason?: string }> {
  const leader = await cell.leader();
  const address = cell.replicas.find((r) => r.id === leader.nodeId)!.grpc;
  const client = new lockservice.LockServiceClient(address, credentials.createInsecure());
  return new Promise((resolve) =>
    client.openSession(
      { clientId: 'cells-test', ttlMs: 30_000, namespace },
      new Metadata(),
      { deadline: Date.now() + 5_000 },
      (err: ServiceError | null, res?: { sessionId: string }) => {
        client.close();
        resolve(err ? { reason: String(err.metadata?.get('lock-reason')[0] ?? err.details) } : { sessionId: res!.sessionId });
      },
    ),
  );
}

describe('GrpcCellDirectory against a real managed cell', () => {
  it('claims a namespace the cell refused before, and drops it (refused while it has sessions, unless forced)', async () => {
    expect((await openSession('orders')).reason).toBe('NAMESPACE_NOT_HERE');
    await dir.claim('cell-1', 'orders');
    await dir.claim('cell-1', 'orders');
    expect((await openSession('orders')).sessionId).toMatch(/^orders:/);
    expect(await dir.drop('cell-1', 'orders', false)).toBe('not-empty');
    // Refused drops leave the namespace serving.
    expect((await openSession('orders')).sessionId).toMatch(/^orders:/);
    expect(await dir.drop('cell-1', 'orders', true)).toBe('dropped');
    expect((await openSession('orders')).reason).toBe('NAMESPACE_NOT_HERE');
    expect(await dir.drop('cell-1', 'orders', true)).toBe('not-owned');
    // A dropped namespace can be claimed again (a tenant re-created on the same cell).
    await dir.claim('cell-1', 'orders');
    expect((await openSession('orders')).sessionId).toMatch(/^orders:/);
  });

  it('shows every replica with its role, and a replica that stops answering as unreachable with lastSeenMs', async () => {
    const ready = await until('every replica reported, the leader with the live session', () => {
      const v = dir.status()[0]!;
      return v.leader !== null && v.sessions >= 1 && v.replicas.every((r) => r.role !== 'unreachable') ? v : undefined;
    });
    expect(ready.replicas.filter((r) => r.role === 'leader').map((r) => r.id)).toEqual([ready.leader]);
    const victim = ready.replicas.find((r) => r.role === 'follower')!;
    cell.signal(victim.id, 'SIGSTOP');
    try {
      const seen: CellView = await until('the stopped replica shows unreachable', () => {
        const v = dir.status()[0]!;
        return v.replicas.find((r) => r.id === victim.id)?.role === 'unreachable' ? v : undefined;
      });
      const first = seen.replicas.find((r) => r.id === victim.id)!.lastSeenMs!;
      expect(first).toBeGreaterThanOrEqual(0);
      const later = await until('lastSeenMs grows', () => {
        const ms = dir.status()[0]!.replicas.find((r) => r.id === victim.id)!.lastSeenMs!;
        return ms > first + 500 ? ms : undefined;
      });
      expect(later).toBeGreaterThan(first);
      expect(
        dir
          .status()[0]!
          .replicas.filter((r) => r.id !== victim.id)
          .every((r) => r.role !== 'unreachable'),
      ).toBe(true);
    } finally {
      cell.signal(victim.id, 'SIGCONT');
    }
    await until('the resumed replica answers again', () =>
      dir.status()[0]!.replicas.find((r) => r.id === victim.id)!.role !== 'unreachable' ? true : undefined,
    );
  }, 60_000);
});
