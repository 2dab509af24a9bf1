/**
 * Goal: a cell whose nodes run with --tls-cert/--tls-key/--tls-ca is whole
 * under mutual TLS: its replicas elect a leader over TLS peer links, a
 * follower forwards a call to the leader over TLS, a router's certificate
 * opens a session, a plaintext client is refused; the admin port answers a
 * control plane's or an operator's certificate and refuses a router's, so a
 * router's credential cannot make an admin write (TransferLeadership); a
 * client whose certificate has expired is refused.
 * Method: three buildCellNode replicas in this process on free 127.0.0.1
 * ports, certificates from tools/scripts/dev-ca.mjs (openssl) in a temp
 * folder, gRPC clients with each holder's certificate. Without openssl the
 * file skips and says so (and fails under CI=true).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import { SeededRandom } from '@fencer/base';
import { adminpb, lockservice } from '@fencer/protocol';
import { anyReplica, grpcChannelCredentials } from '@fencer/peer-transport';
import { TlsFiles, type TlsPaths } from '@fencer/service';
import { issueTestCerts, opensslMissing } from '@fencer/service/testing';
import { pino } from 'pino';
import { freePortBase } from '@fencer/fleet/testing';
import { type CellNodeApp, buildCellNode } from '../src/build.js';
import { type CellNodeConfig, parseConfig } from '../src/config.js';
import { eventually } from './support/cell.js';
import { NodeMetrics } from '../src/metrics.js';

const missing = opensslMissing();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`cell-node tls.spec: ${missing}; CI=true needs it`);
if (missing !== undefined) console.warn(`cell-node tls.spec: skipped: ${missing}`);

const dir = mkdtempSync(path.join(tmpdir(), 'fencer-node-tls-'));
const ids = ['t1', 't2', 't3'];
let certs: Record<string, TlsPaths> = {};
const apps: CellNodeApp[] = [];
const configs: CellNodeConfig[] = [];

const call = <Res>(invoke: (md: Metadata, opts: { deadline: number }, cb: (e: ServiceError | null, r: Res) => void) => void) =>
  new Promise<Res>((resolve, reject) => invoke(new Metadata(), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))));

function lockClient(address: string, holder: string | undefined): InstanceType<typeof lockservice.LockServiceClient> {
  const creds = holder === undefined ? credentials.createInsecure() : grpcChannelCredentials(new TlsFiles(certs[holder]!), anyReplica);
  return new lockservice.LockServiceClient(address, creds);
}

function adminOf(address: string, holder: string): InstanceType<typeof adminpb.CellAdminClient> {
  return new adminpb.CellAdminClient(address, grpcChannelCredentials(new TlsFiles(certs[holder]!), anyReplica));
}

beforeAll(async () => {
  if (missing !== undefined) return;
  certs = issueTestCerts(dir, [
    ...ids.map((name) => ({ name, cell: 'cell-1' })),
    { name: 'r1', kind: 'router' as const },
    { name: 'cp1', kind: 'control-plane' as const },
    { name: 'op1', kind: 'operator' as const },
  ]);
  // A router whose certificate expired the second it was made (valid CA, valid name, out of date).
  Object.assign(certs, issueTestCerts(dir, [{ name: 'r-old', kind: 'router' as const }], { days: 0 }));
  const base = await freePortBase(3);
  const peers = ids.map((id, i) => `${id}=127.0.0.1:${base + 1 + i}`).join(',');
  for (const [i, id] of ids.entries()) {
    const port = base + 1 + i;
    const c = certs[id]!;
    const config = parseConfig(
      ['--id', id, '--peers', peers, '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${port + 100}`],
      {
        FENCER_METRICS_LISTEN: `127.0.0.1:${port + 200}`,
        FENCER_DATA_DIR: path.join(dir, id),
        FENCER_TLS_CERT: c.cert,
        FENCER_TLS_KEY: c.key,
        FENCER_TLS_CA: c.ca,
      },
    );
    configs.push(config);
    apps.push(
      await buildCellNode({
        config,
        clock: { monoMs: () => performance.now(), wallMs: () => Date.now() },
        random: new SeededRandom(i + 1),
        logger: pino({ level: process.env['TLS_SPEC_LOG'] ?? 'silent' }),
        metrics: new NodeMetrics(),
        onFatal: (err) => {
          throw err;
        },
        nowMs: () => performance.now(),
      }),
    );
  }
}, 120_000);

afterAll(async () => {
  for (const app of apps) await app.close();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe.skipIf(missing !== undefined)('a cell under mutual TLS', () => {
  it('elects a leader over TLS peer links, and a follower forwards to it over TLS', async () => {
    const leader = await eventually(() => apps.findIndex((a) => a.node.isLeader) + 1 || undefined, 60_000, 'a leader');
    const follower = configs[leader % 3]!;
    const client = lockClient(follower.listen, 'r1');
    try {
      const opened = await call<lockservice.OpenSessionResponse>((md, o, cb) =>
        client.openSession({ namespace: 'tls', clientId: 't', ttlMs: 10_000 }, md, o, cb),
      );
      expect(opened.sessionId.startsWith('tls:')).toBe(true);
    } finally {
      client.close();
    }
  }, 90_000);

  it('refuses a client whose certificate has expired', async () => {
    // r-old's validity ended the second it was issued, before the cell started.
    const client = lockClient(configs[0]!.listen, 'r-old');
    const e = await call((md, o, cb) => client.openSession({ namespace: 'tls', clientId: 't', ttlMs: 10_000 }, md, o, cb)).then(
      () => undefined,
      (err: ServiceError) => err,
    );
    client.close();
    expect(e?.code).toBe(status.UNAVAILABLE);
  });

  it('refuses a plaintext client on the client port', async () => {
    const client = lockClient(configs[0]!.listen, undefined);
    const e = await call((md, o, cb) => client.openSession({ namespace: 'tls', clientId: 't', ttlMs: 10_000 }, md, o, cb)).then(
      () => undefined,
      (err: ServiceError) => err,
    );
    client.close();
    expect(e?.code).toBe(status.UNAVAILABLE);
  });

  it("answers an operator's and a control plane's certificate on the admin port, and refuses a router's admin write", async () => {
    const leader = await eventually(() => apps.findIndex((a) => a.node.isLeader) + 1 || undefined, 60_000, 'a leader');
    const adminAddress = configs[leader - 1]!.adminListen;
    for (const holder of ['op1', 'cp1']) {
      const c = adminOf(adminAddress, holder);
      const res = await call<adminpb.StatusResponse>((md, o, cb) => c.status({}, md, o, cb));
      c.close();
      expect(res.nodeId).toBe(ids[leader - 1]);
    }
    const router = adminOf(adminAddress, 'r1');
    const target = ids[leader % 3]!;
    const e = await call((md, o, cb) => router.transferLeadership({ to: target }, md, o, cb)).then(
      () => undefined,
      (err: ServiceError) => err,
    );
    router.close();
    expect(e?.code).toBe(status.UNAVAILABLE);
    // Refused at the handshake: leadership stayed where it was.
    expect(apps[leader - 1]!.node.isLeader).toBe(true);
  });
});
