/**
 * Test support: a real cell of cell-node processes on 127.0.0.1, and a small
 * client that follows leader hints and retries UNAVAILABLE with the same
 * request (what the client library does, kept minimal so these tests check
 * the server alone).
 */
import path from 'node:path';
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { adminClient, type ReplicaPlan } from '@fencer/fleet';
import { type adminpb, fromServiceError } from '@fencer/protocol';
import { startTestCell, type TestCell } from '@fencer/fleet/testing';
import { TestClient } from '@fencer/fleet/contract';

export interface Cell extends TestCell {
  client: TestClient;
}

/** A real cell (tools/fleet/test-cell.mjs) plus a retrying test client over its replicas. */
export async function startCell(opts: { replicas?: number; extraArgs?: string[] } = {}): Promise<Cell> {
  const cell = await startTestCell(opts);
  const client = new TestClient(cell.endpoints);
  const stop = cell.stop;
  return Object.assign(cell, {
    client,
    stop: async () => {
      client.close();
      await stop();
    },
  });
}

export { TestClient, eventually } from '@fencer/fleet/contract';

export { adminClient };

/** One CellAdmin call on a replica's admin port (10 s deadline); rejects with the FencerError the replica answered. */
export function admin<Req, Res>(address: string, method: keyof adminpb.CellAdminClient, req: Req): Promise<Res> {
  const c = adminClient(address) as unknown as Record<string, (...args: unknown[]) => unknown>;
  return new Promise((resolve, reject) =>
    c[method]!.call(c, req, new Metadata(), { deadline: Date.now() + 10_000 }, (e: ServiceError | null, r: Res) => {
      (c as unknown as { close(): void }).close();
      if (e) reject(fromServiceError(e));
      else resolve(r);
    }),
  );
}

/**
 * The plan of a new process for `cell`, started with --join: its ports are
 * the first replica's moved by `portOffset` (peer port at its gRPC port +
 * `peerPortShift`), and its --peers name the original replicas and itself
 * only: what it learns of later members comes from the replicated member
 * directory.
 */
export function planJoiner(cell: Cell, id: string, portOffset: number, peerPortShift = 300): ReplicaPlan {
  const base = cell.replicas[0]!;
  const host = base.grpc.split(':')[0]!;
  const port = Number(base.grpc.split(':')[1]) + portOffset;
  const grpc = `${host}:${port}`;
  const argv = [...base.argv];
  const set = (flag: string, value: string): void => {
    argv[argv.indexOf(flag) + 1] = value;
  };
  const dataDir = path.join(cell.dataDir, id);
  set('--id', id);
  set('--listen', grpc);
  set('--admin-listen', `${host}:${port + 100}`);
  set('--metrics-listen', `${host}:${port + 200}`);
  set('--peer-listen', `${host}:${port + peerPortShift}`);
  set('--peers', [...cell.replicas.map((r) => `${r.id}=${r.grpc}`), `${id}=${grpc}`].join(','));
  set('--data-dir', dataDir);
  argv.push('--join');
  return {
    ...base,
    id,
    grpc,
    admin: `${host}:${port + 100}`,
    peer: `${host}:${port + peerPortShift}`,
    metrics: `http://${host}:${port + 200}/metrics`,
    argv,
    dataDir,
  };
}
