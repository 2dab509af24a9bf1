/**
 * Goal: `fencer tenants create|list|get|delete|quota`, `fencer routing` and
 * `fencer fleet status` drive the control plane as a user would: tables by
 * default, JSON with --json, the URL from --control-plane, from
 * FENCER_CONTROL_PLANE or from fleet.json's controlPlane.urls, errors as
 * messages with a non-zero exit code.
 * Method: the real app (one-member meta group, fake cells) listening on
 * 127.0.0.1 port 0, and the `fencer` bin as its own process (an app never
 * imports another app), with only the environment each case gives it.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './support/harness.js';
import { root } from './support/instances.js';

const FENCER = path.join(root, 'node_modules/.bin/fencer');
/** A bound on one CLI run; each gives the CLI --timeout 3s, so only a hung process reaches it. */
const runTimeoutMs = 20_000;

let h: Harness;
let url = '';
let dir = '';
beforeAll(async () => {
  h = await startHarness({ cells: ['cell-1', 'cell-2'] });
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-cli-cp-'));
});
afterAll(async () => {
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Asynchronous: the app under test answers on this very event loop. */
function fencer(args: string[], env: Record<string, string> = {}, cwd = dir): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const argv = [FENCER, '--timeout', '3s', ...args];
    execFile(process.execPath, argv, { cwd, env: { ...env }, timeout: runTimeoutMs }, (error, out, err) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, out, err });
    });
  });
}

describe('fencer tenants / routing / fleet status', () => {
  it('creates a tenant on the named cell and prints it as a table; the cell claims it', async () => {
    const r = await fencer(['tenants', 'create', 'payments', '--cell', 'cell-2', '--max-locks', '50', '--control-plane', url]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^NAMESPACE\s+CELL\s+OWNER\s+QUOTAS\s+STATE\s+CREATED\n/);
    expect(r.out).toMatch(/payments\s+cell-2\s+-\s+maxLocks=50\s+active/);
    expect(h.cells.owned.get('cell-2')?.has('payments')).toBe(true);
  });

  it('finds the URL in FENCER_CONTROL_PLANE and in fleet.json, and prints JSON with --json', async () => {
    const viaEnv = await fencer(['--json', 'tenants', 'get', 'payments'], { FENCER_CONTROL_PLANE: url });
    expect(JSON.parse(viaEnv.out)).toMatchObject({ namespace: 'payments', cell: 'cell-2', quotas: { maxLocks: 50 } });
    mkdirSync(path.join(dir, '.fencer'), { recursive: true });
    writeFileSync(
      path.join(dir, '.fencer', 'fleet.json'),
      JSON.stringify({ lockService: [], cells: [], controlPlane: { urls: ['http://127.0.0.1:1', url] } }),
    );
    const viaFleet = await fencer(['--json', 'tenants', 'list']);
    expect(viaFleet.code).toBe(0);
    expect(JSON.parse(viaFleet.out).tenants.map((t: { namespace: string }) => t.namespace)).toEqual(['payments']);
  });

  it('changes quotas, shows routing and fleet status, deletes', async () => {
    const q = await fencer(['tenants', 'quota', 'payments', '--max-sessions', '9']);
    expect(q.out).toMatch(/maxSessions=9,maxLocks=50/);
    const routing = await fencer(['routing']);
    expect(routing.out).toMatch(/^version 1\n/);
    expect(routing.out).toMatch(/payments\s+cell-2\s+active/);
    const fleet = await fencer(['fleet', 'status']);
    expect(fleet.out).toMatch(/cell-2\s+cell-2-r1\s+127\.0\.0\.1:7002\s+leader\s+3\s+10\s+5ms/);
    expect(fleet.out).toMatch(/cell-1\s+cell-1-r2\s+127\.0\.0\.1:7101\s+unreachable/);
    expect(fleet.out).toMatch(/cell-2: payments/);
    const del = await fencer(['tenants', 'delete', 'payments']);
    expect([del.code, del.out]).toEqual([0, 'deleted payments\n']);
    expect(h.cells.owned.get('cell-2')?.has('payments')).toBe(false);
  });

  it('says what went wrong: a problem document exits 1, no control plane exits 78, none answering exits 69', async () => {
    const missing = await fencer(['tenants', 'get', 'nobody', '--control-plane', url]);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/TENANT_NOT_FOUND: no tenant "nobody"/);
    const bad = await fencer(['tenants', 'create', '-x', '--control-plane', url]);
    expect(bad.code).not.toBe(0);
    const none = await fencer(['tenants', 'list'], {}, tmpdir());
    expect(none.code).toBe(78);
    expect(none.err).toMatch(/no control plane/);
    const down = await fencer(['tenants', 'list', '--control-plane', 'http://127.0.0.1:1']);
    expect(down.code).toBe(69);
  });
});
