/**
 * Goal: the CLI talks to a `--secure` fleet as its help says. `--token` (and
 * $FENCER_TOKEN) rides as `authorization: Bearer` on every lock-contract call
 * and stream of `fencer lock`, `get`, `list` and `watch`, the flag winning
 * over the variable; `--tls-ca` turns TLS on for them (a plaintext CLI is
 * refused by a TLS port); `--tls-cert/--tls-key` present an operator's
 * certificate to a cell's admin port that requires one; the control-plane
 * commands reach an https URL signed by the fleet's CA with `--tls-ca`, and
 * send the token there. A certificate without its key is a configuration error.
 * Method: runCli in-process against the fake LockService serving mutual TLS
 * (its CellAdmin.Status too), and a node:https server standing for the
 * control plane; certificates from tools/scripts/dev-ca.mjs (openssl). Without
 * openssl the file skips and says so (and fails under CI=true).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ServerCredentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeLockService } from '@fencer/client/testing';
import { issueTestCerts, opensslMissing } from '@fencer/service/testing';
import { EXIT, runCli, type CliIo } from '../src/index.js';

const missing = opensslMissing();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`secure-commands.spec: ${missing}; CI=true needs it`);
if (missing !== undefined) console.warn(`secure-commands.spec: skipped: ${missing}`);

const dir = mkdtempSync(path.join(tmpdir(), 'fencer-cli-secure-'));
let fake: FakeLockService;
let cp: Server;
let cpUrl = '';
const cpAuthorizations: string[] = [];
let certs: ReturnType<typeof issueTestCerts>;

beforeAll(async () => {
  if (missing !== undefined) return;
  certs = issueTestCerts(dir, [
    { name: 'cell-1-r1', cell: 'cell-1' },
    { name: 'ops', kind: 'operator' },
    { name: 'cp-1', kind: 'control-plane' },
  ]);
  const r1 = certs['cell-1-r1']!;
  const read = (f: string): Buffer => readFileSync(f);
  fake = await FakeLockService.start({
    // Like a secure cell node: its certificate, and a client certificate signed by the fleet's CA required.
    serverCredentials: ServerCredentials.createSsl(read(r1.ca), [{ private_key: read(r1.key), cert_chain: read(r1.cert) }], true),
    adminStatus: statusOf('cell-1-r1'),
  });
  const cpCert = certs['cp-1']!;
  cp = createServer({ cert: read(cpCert.cert), key: read(cpCert.key) }, (req, res) => {
    cpAuthorizations.push(String(req.headers.authorization ?? ''));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ version: 7, routes: [{ namespace: 'acme', cell: 'cell-1', state: 'active' }] }));
  });
  await new Promise<void>((resolve) => cp.listen(0, '127.0.0.1', resolve));
  cpUrl = `https://127.0.0.1:${(cp.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await fake?.stop();
  cp?.closeAllConnections();
  await new Promise((r) => (cp ? cp.close(r) : r(undefined)));
  rmSync(dir, { recursive: true, force: true });
});

function statusOf(nodeId: string) {
  return {
    cellId: 'cell-1',
    nodeId,
    role: 'leader',
    term: 2,
    leaderId: nodeId,
    leaderAddress: '',
    commitIndex: 5,
    appliedIndex: 5,
    lastIndex: 5,
    snapshotIndex: 0,
    members: [{ id: nodeId, address: '', peerAddress: '', voter: true, matchIndex: 5, lag: 0, state: 'self' }],
    revisionBase: 0,
    sessions: 0,
    locks: 0,
    waiters: 0,
  };
}

async function run(argv: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    env: { FENCER_ENDPOINTS: fake.address, ...env },
    cwd: dir,
    clientOptions: { backoffBaseMs: 5, backoffMaxMs: 20 },
    childStdio: 'ignore',
  };
  const code = await runCli(argv, io);
  return { code, out, err };
}

/** The operator's flags: the fake requires a client certificate, as a cell does. */
const operator = (): string[] => ['--tls-ca', certs['ops']!.ca, '--tls-cert', certs['ops']!.cert, '--tls-key', certs['ops']!.key];

describe.skipIf(missing !== undefined)('the CLI against a --secure fleet', () => {
  it('sends --token as authorization: Bearer on every call and stream of `fencer lock`, over TLS', async () => {
    const from = fake.authorizations.length;
    const r = await run([
      'lock',
      '--token',
      'tok-lock',
      ...operator(),
      '/ls/acme/job',
      '--',
      process.execPath,
      '-e',
      'setTimeout(() => {}, 300)',
    ]);
    expect(r.code, r.err).toBe(EXIT.OK);
    const seen = fake.authorizations.slice(from);
    const methods = new Set(seen.map((a) => a.method));
    for (const m of ['openSession', 'acquire', 'release', 'closeSession']) expect(methods, m).toContain(m);
    expect(seen.every((a) => a.authorization === 'Bearer tok-lock')).toBe(true);
  });

  it('sends it on get, list and watch too; the flag wins over $FENCER_TOKEN, which is used without it', async () => {
    let from = fake.authorizations.length;
    expect((await run(['get', '/ls/acme/job', '--token', 'tok-flag', ...operator()], { FENCER_TOKEN: 'tok-env' })).code).toBe(EXIT.OK);
    expect((await run(['list', '/ls/acme/', ...operator()], { FENCER_TOKEN: 'tok-env' })).code).toBe(EXIT.OK);
    expect(fake.authorizations.slice(from).map((a) => `${a.method} ${a.authorization}`)).toEqual([
      'getLock Bearer tok-flag',
      'listLocks Bearer tok-env',
    ]);
    from = fake.authorizations.length;
    const ac = new AbortController();
    const watching = runCli(['watch', '/ls/acme/', '--token', 'tok-watch', ...operator()], {
      stdout: () => {},
      stderr: () => {},
      env: { FENCER_ENDPOINTS: fake.address },
      cwd: dir,
      signal: ac.signal,
    });
    await waitFor(() => fake.authorizations.slice(from).some((a) => a.method === 'watch'), 'the watch stream to open');
    ac.abort();
    expect(await watching).toBe(EXIT.OK);
    expect(fake.authorizations.slice(from)).toEqual([{ method: 'watch', authorization: 'Bearer tok-watch' }]);
  });

  it('is refused by the TLS port without --tls-ca (plaintext), and without a client certificate', async () => {
    const plain = await run(['get', '/ls/acme/job', '--timeout', '1s']);
    expect(plain.code).toBe(EXIT.UNAVAILABLE);
    const noCert = await run(['get', '/ls/acme/job', '--timeout', '1s', '--tls-ca', certs['ops']!.ca]);
    expect(noCert.code).toBe(EXIT.UNAVAILABLE);
  });

  it("presents the operator's certificate to a cell's admin port (cell status), from the flags or $FENCER_TLS_*", async () => {
    const admin = ['cell', 'status', '--admin', fake.address, '--json'];
    const byFlags = await run([...admin, ...operator()]);
    expect(byFlags.code, byFlags.err).toBe(EXIT.OK);
    expect(JSON.parse(byFlags.out)).toMatchObject({ leaderId: 'cell-1-r1', replicas: [{ reachable: true }] });
    const ops = certs['ops']!;
    const byEnv = await run(admin, { FENCER_TLS_CA: ops.ca, FENCER_TLS_CERT: ops.cert, FENCER_TLS_KEY: ops.key });
    expect(byEnv.code, byEnv.err).toBe(EXIT.OK);
    expect((await run([...admin, '--timeout', '1s'])).code).toBe(EXIT.UNAVAILABLE);
  });

  it('reaches an https control plane signed by the fleet CA with --tls-ca, sending the token; refused without it', async () => {
    cpAuthorizations.length = 0;
    const r = await run(['routing', '--json', '--control-plane', cpUrl, '--tls-ca', certs['cp-1']!.ca, '--token', 'admin-tok']);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(JSON.parse(r.out)).toMatchObject({ version: 7 });
    expect(cpAuthorizations).toEqual(['Bearer admin-tok']);
    const untrusted = await run(['routing', '--control-plane', cpUrl, '--timeout', '1s']);
    expect(untrusted.code).toBe(EXIT.UNAVAILABLE);
    expect(untrusted.err).toMatch(/did not answer/);
  });

  it('refuses a certificate without its key, and a certificate without a CA, naming the flags', async () => {
    const noKey = await run(['get', '/ls/acme/job', '--tls-ca', certs['ops']!.ca, '--tls-cert', certs['ops']!.cert]);
    expect(noKey.code).toBe(EXIT.CONFIG);
    expect(noKey.err).toMatch(/--tls-cert needs its pair/);
    const noCa = await run(['get', '/ls/acme/job', '--tls-cert', certs['ops']!.cert, '--tls-key', certs['ops']!.key]);
    expect(noCa.code).toBe(EXIT.CONFIG);
    expect(noCa.err).toMatch(/--tls-cert needs --tls-ca/);
    const unreadable = await run(['get', '/ls/acme/job', '--tls-ca', path.join(dir, 'absent.crt')]);
    expect(unreadable.code).toBe(EXIT.CONFIG);
    expect(unreadable.err).toMatch(/--tls-ca: cannot read/);
  });
});

async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
