/**
 * Goal: the project's contract cases pass against a cell reached directly
 * when it runs with mutual TLS on every link (decision 0016), the cell-only
 * cases (HeartbeatBatch, metrics) included; a plaintext client is refused on
 * each replica's client, admin and peer ports (its metrics port stays
 * plaintext by design). The router and the proxy under TLS are
 * apps/cell-router/test/contract-secure.spec.ts's.
 * Method: @fencer/fleet starts 1 cell x 3 cell-node processes on
 * 127.0.0.1 with `tls: true` (certificates from tools/scripts/dev-ca.mjs,
 * openssl); the shared cases of @fencer/fleet/contract run with an
 * operator's certificate, calls going to a follower first. Without openssl
 * the file skips and says so (and fails under CI=true).
 */
import { connect } from 'node:net';
import { Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminpb, lockservice } from '@fencer/protocol';
import { opensslMissing } from '@fencer/service/testing';
import { contractSuite, TestClient } from '@fencer/fleet/contract';
import { startTestFleet, type TestCell, type TestFleet } from '@fencer/fleet/testing';

const missing = opensslMissing();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`cell-node contract-secure.spec: ${missing}; CI=true needs it`);
if (missing !== undefined) console.warn(`cell-node contract-secure.spec: skipped: ${missing}`);

let fleet: TestFleet;
let client: TestClient;
let cell: TestCell;

beforeAll(async () => {
  if (missing !== undefined) return;
  fleet = await startTestFleet({
    cells: 1,
    replicas: 3,
    routers: 0,
    proxies: 0,
    tls: true,
    extraArgs: ['--watch-history-max', '200', '--watch-progress-ms', '1000'],
  });
  const replicas = fleet.plan[0]!.replicas;
  client = new TestClient(replicas.map((r) => r.grpc));
  cell = cellOf(fleet);
}, 180_000);
afterAll(async () => {
  client?.close();
  await fleet?.stop();
});

/** The fleet's one cell as the cell-only cases read it (its replicas and leader). */
function cellOf(f: TestFleet): TestCell {
  const replicas = f.plan[0]!.replicas;
  const ids = new Set(replicas.map((r) => r.id));
  return {
    replicas,
    endpoints: replicas.map((r) => r.grpc),
    children: f.children,
    dataDir: f.dataDir,
    leader: (timeoutMs) => f.leaderOf('cell-1', timeoutMs),
    leaderAmong: async (among, timeoutMs) => {
      const s = await f.leaderOf('cell-1', timeoutMs);
      if (!among.includes(s.nodeId)) throw new Error(`the leader ${s.nodeId} is not among ${among.join(', ')}`);
      return s;
    },
    statusOf: (id, timeoutMs) => f.statusOf(id, timeoutMs),
    signal: (id, sig) => f.signal(id, sig),
    kill: (id, sig) => f.kill(id, sig),
    restart: (id) => f.restart(id),
    stop: async () => {
      for (const id of ids) if (f.alive(id)) await f.kill(id, 'SIGTERM');
    },
  };
}

const addressOf = (id: string): string => cell.replicas.find((r) => r.id === id)!.grpc;

if (missing === undefined)
  contractSuite({
    kind: 'cell',
    target: () => ({
      client,
      cell,
      leaderAddress: async () => addressOf((await cell.leader()).nodeId),
      followerAddress: async () => {
        const leader = (await cell.leader()).nodeId;
        return cell.replicas.find((r) => r.id !== leader)!.grpc;
      },
      keepAliveAddresses: () => cell.endpoints,
      anyAddress: () => cell.replicas[0]!.grpc,
      leaderMetrics: async () => {
        const leader = (await cell.leader()).nodeId;
        return cell.replicas.find((r) => r.id === leader)!.metrics;
      },
    }),
  });

/** The code a plaintext unary call gets. */
function plaintextCall(
  invoke: (md: Metadata, opts: { deadline: number }, cb: (e: ServiceError | null) => void) => void,
): Promise<number | undefined> {
  return new Promise((resolve) => invoke(new Metadata(), { deadline: Date.now() + 5_000 }, (e) => resolve(e?.code)));
}

/** Resolves once a server closes a plaintext TCP connection that sent it `bytes`; rejects after timeoutMs. */
function closedAfter(address: string, bytes: Buffer, timeoutMs: number): Promise<void> {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port }, () => socket.write(bytes));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${address} kept a plaintext connection open for ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe.skipIf(missing !== undefined)('a plaintext client of a secure cell', () => {
  it("is refused on every replica's client port, admin port and peer port", async () => {
    for (const r of cell.replicas) {
      const lock = new lockservice.LockServiceClient(r.grpc, credentials.createInsecure());
      expect(
        await plaintextCall((md, o, cb) => lock.openSession({ namespace: 'plain', clientId: 't', ttlMs: 10_000 }, md, o, cb)),
        r.grpc,
      ).toBe(status.UNAVAILABLE);
      lock.close();
      const admin = new adminpb.CellAdminClient(r.admin, credentials.createInsecure());
      expect(await plaintextCall((md, o, cb) => admin.transferLeadership({ to: '' }, md, o, cb)), r.admin).toBe(status.UNAVAILABLE);
      admin.close();
      // A peer frame's length prefix and some bytes: not a TLS ClientHello.
      await closedAfter(r.peer, Buffer.from([0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]), 10_000);
    }
    // The cell kept serving the operator's TLS client meanwhile.
    expect((await client.openSession('after-plain')).sessionId).toMatch(/^after-plain:/);
  });
});
