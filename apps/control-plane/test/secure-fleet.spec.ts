/**
 * Goal: issue 29's security bar on the fleet `npm start -- --secure` runs
 * (decision 0016), as a user meets it. The control plane serves HTTPS only
 * with auth on; the `fencer` CLI trusting the fleet's CA (--tls-ca) creates
 * a tenant with the admin token and takes a lock through the router with
 * the tenant's token; a plaintext client is refused by the router, the
 * proxy and a cell. Mixed credentials are refused on the real processes: a
 * replica of another cell at a replica's peer port and a cell's replica at
 * the meta group's peer port (each refusal counted as foreign-certificate),
 * a client whose certificate has expired (client and admin ports), and a
 * router's credentials used for an admin write (its certificate on a cell's
 * admin port, its front-end token on the control plane).
 * Method: tools/fleet/launch.mjs --secure (2 cells of 1 replica, a router, a
 * proxy, a control plane) on a free port block and a temporary folder; the
 * `fencer` bin as its own process; raw TLS sockets and gRPC clients with the
 * certificates the launcher's development CA issued (openssl), plus one
 * expired certificate from the same CA. Without openssl the file skips and
 * says so (and fails under CI=true).
 */
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminpb, lockservice } from '@fencer/protocol';
import { opensslMissing } from '@fencer/service/testing';
import { type LaunchedFleet, launchFleet } from './support/launched-fleet.js';
import { root } from './support/instances.js';

const missing = opensslMissing();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`secure-fleet.spec: ${missing}; CI=true needs it`);
if (missing !== undefined) console.warn(`secure-fleet.spec: skipped: ${missing}`);

const FENCER = path.join(root, 'node_modules/.bin/fencer');
const DEV_CA = path.join(root, 'tools/scripts/dev-ca.mjs');
/** A bound on one CLI run; each gives the CLI --timeout, so only a hung process reaches it. */
const runTimeoutMs = 60_000;

/** What this file reads of the --secure fleet.json beyond launched-fleet's FleetJson. */
interface SecureFleet {
  lockService: string[];
  proxies: { id: string; grpc: string }[];
  routers: { id: string; grpc: string }[];
  controlPlane: { urls: string[] };
  cells: { id: string; replicas: { id: string; grpc: string; admin: string; metrics: string; argv: string[] }[] }[];
}

let launched: LaunchedFleet | undefined;
let fleet: SecureFleet;
let tlsDir = '';
let tenantToken = '';

beforeAll(async () => {
  if (missing !== undefined) return;
  launched = await launchFleet('fencer-secure-fleet-', { cells: 2, replicas: 1, routers: 1, proxies: 1, controlPlanes: 1 }, 300_000, [
    '--secure',
  ]);
  fleet = launched.fleet as unknown as SecureFleet;
  tlsDir = path.join(launched.dir, '.fencer', 'tls');
}, 360_000);

afterAll(async () => {
  await launched?.stop();
}, 60_000);

const pem = (name: string): Buffer => readFileSync(path.join(tlsDir, name));
const caFile = (): string => path.join(tlsDir, 'ca.crt');
const replica = (cell: number) => fleet.cells[cell - 1]!.replicas[0]!;
const flagOf = (argv: readonly string[], flag: string): string => argv[argv.indexOf(flag) + 1]!;

function fencer(args: string[], timeout = '10s'): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    // Only the folder's fleet.json and admin-token, and what the case passes.
    const env = { PATH: process.env['PATH'] ?? '' };
    execFile(
      process.execPath,
      [FENCER, '--timeout', timeout, ...args],
      { cwd: launched!.dir, env, timeout: runTimeoutMs },
      (error, out, err) => {
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, out, err });
      },
    );
  });
}

/** One HTTPS request to the control plane trusting the fleet's CA: status and body. */
function https(method: string, urlPath: string, token: string | undefined, body?: unknown): Promise<{ status: number; text: string }> {
  const url = new URL(urlPath, fleet.controlPlane.urls[0]!);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        method,
        ca: pem('ca.crt'),
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
        timeout: 20_000,
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** The gRPC code of one OpenSession with these credentials (undefined: it was served). */
function openSessionCode(address: string, creds: ReturnType<typeof credentials.createInsecure>): Promise<number | undefined> {
  const c = new lockservice.LockServiceClient(address, creds);
  return new Promise((resolve) =>
    c.openSession({ namespace: 'acme', clientId: 't', ttlMs: 10_000 }, new Metadata(), { deadline: Date.now() + 10_000 }, (e) => {
      c.close();
      resolve(e?.code);
    }),
  );
}

/** The gRPC code of an admin call with these credentials. */
function adminCode(address: string, creds: ReturnType<typeof credentials.createInsecure>, write: boolean): Promise<number | undefined> {
  const c = new adminpb.CellAdminClient(address, creds);
  const done = (e: ServiceError | null): number | undefined => (c.close(), e?.code);
  const opts = { deadline: Date.now() + 10_000 };
  return new Promise((resolve) =>
    write
      ? c.transferLeadership({ to: '' }, new Metadata(), opts, (e) => resolve(done(e)))
      : c.status({}, new Metadata(), opts, (e) => resolve(done(e))),
  );
}

/** TLS gRPC credentials presenting holder `name`'s certificate (issued by the launcher's CA). */
const as = (name: string) => credentials.createSsl(pem('ca.crt'), pem(`${name}.key`), pem(`${name}.crt`));

/** The value of fencer_raft_messages_refused_total{reason} on a metrics URL (0 when absent). */
async function refused(metricsUrl: string, reason: string): Promise<number> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(10_000) })).text();
  const m = new RegExp(`^fencer_raft_messages_refused_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(text);
  return Number(m?.[1] ?? 0);
}

async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Opens a TLS connection presenting `name`'s certificate; resolves once the server has closed it. */
function closedByServer(address: string, name: string, timeoutMs: number): Promise<void> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: address.slice(0, i),
      port: Number(address.slice(i + 1)),
      // The certificates name localhost beside 127.0.0.1; a server name may not be an IP address.
      servername: 'localhost',
      ca: pem('ca.crt'),
      cert: pem(`${name}.crt`),
      key: pem(`${name}.key`),
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${address} kept ${name}'s connection open for ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe.skipIf(missing !== undefined)('npm start -- --secure', () => {
  it('serves the control plane over HTTPS only, with auth on; the CLI trusting the CA (--tls-ca) creates a tenant', async () => {
    expect(fleet.controlPlane.urls[0]).toMatch(/^https:\/\//);
    const created = await fencer(['--json', 'tenants', 'create', 'acme', '--cell', 'cell-1', '--tls-ca', caFile()], '30s');
    expect(created.code, created.err).toBe(0);
    tenantToken = (JSON.parse(created.out) as { token: string }).token;
    expect(tenantToken.length).toBeGreaterThan(10);
    // Not trusting the CA, the CLI does not get an answer; without a token the API refuses.
    const untrusted = await fencer(['tenants', 'list'], '2s');
    expect(untrusted.code).toBe(69);
    expect((await https('GET', '/v1/tenants', undefined)).status).toBe(401);
    // Plain HTTP on the HTTPS port gets no HTTP answer.
    const plainUrl = fleet.controlPlane.urls[0]!.replace(/^https:/, 'http:');
    await expect(fetch(`${plainUrl}/v1/health`, { signal: AbortSignal.timeout(10_000) })).rejects.toThrow();
  }, 120_000);

  it('a client trusting the CA takes a lock through the router with its token; a plaintext client is refused everywhere', async () => {
    expect(tenantToken).not.toBe('');
    const locked = await fencer(
      ['lock', '/ls/acme/job', '--tls-ca', caFile(), '--token', tenantToken, '--', process.execPath, '-e', ''],
      '60s',
    );
    expect(locked.code, locked.err).toBe(0);
    for (const address of [fleet.lockService[0]!, fleet.proxies[0]!.grpc, replica(1).grpc])
      expect(await openSessionCode(address, credentials.createInsecure()), address).toBe(status.UNAVAILABLE);
    expect(await adminCode(replica(1).admin, credentials.createInsecure(), false)).toBe(status.UNAVAILABLE);
  }, 120_000);
});

describe.skipIf(missing !== undefined)('mixed credentials on the --secure fleet', () => {
  it("refuses a replica of another cell at a replica's peer port, and a cell's replica at the meta group's peer port", async () => {
    const r1 = replica(1);
    const before = await refused(r1.metrics, 'foreign-certificate');
    await closedByServer(flagOf(r1.argv, '--peer-listen'), replica(2).id, 15_000);
    await eventually(
      async () => ((await refused(r1.metrics, 'foreign-certificate')) > before ? true : undefined),
      15_000,
      'the refusal counted',
    );
    // The meta group's peer port is the control plane's HTTP port + 50 (tools/fleet/fleet.mjs).
    const cpPort = Number(new URL(fleet.controlPlane.urls[0]!).port);
    const cpMetrics = `http://127.0.0.1:${cpPort + 100}/metrics`;
    const cpBefore = await refused(cpMetrics, 'foreign-certificate');
    await closedByServer(`127.0.0.1:${cpPort + 50}`, r1.id, 15_000);
    await eventually(
      async () => ((await refused(cpMetrics, 'foreign-certificate')) > cpBefore ? true : undefined),
      15_000,
      'the meta refusal',
    );
  }, 60_000);

  it('refuses a client whose certificate has expired, on the client and admin ports', async () => {
    execFileSync(process.execPath, [DEV_CA, '--dir', tlsDir, '--days', '0', '--operator', 'expired-op'], { stdio: 'pipe' });
    const validTo = Date.parse(new X509Certificate(pem('expired-op.crt')).validTo);
    // Its validity ends the second it is issued: wait for the clock to pass it.
    await eventually(async () => (Date.now() > validTo ? true : undefined), 5_000, 'the certificate to expire');
    expect(await openSessionCode(replica(1).grpc, as('expired-op'))).toBe(status.UNAVAILABLE);
    expect(await adminCode(replica(1).admin, as('expired-op'), false)).toBe(status.UNAVAILABLE);
    // The same CA's valid operator certificate is served on both.
    expect(await adminCode(replica(1).admin, as('fleet-operator'), false)).toBeUndefined();
  }, 60_000);

  it("refuses a router's credentials for an admin write: its certificate on a cell's admin port, its front-end token on the control plane", async () => {
    expect(await adminCode(replica(1).admin, as(fleet.routers[0]!.id), true)).toBe(status.UNAVAILABLE);
    const frontEnd = readFileSync(path.join(launched!.dir, '.fencer', 'front-end-token'), 'utf8').trim();
    const write = await https('PATCH', '/v1/tenants/acme', frontEnd, { quotas: { maxSessions: 1 } });
    expect(write.status).toBe(403);
    expect((await https('POST', '/v1/tenants/acme/token', frontEnd)).status).toBe(403);
    // The front-end token still reads what a front end needs.
    expect((await https('GET', '/v1/routing', frontEnd)).status).toBe(200);
  }, 60_000);
});
