/**
 * Goal: `fencer tenants create|list|get|delete|quota`, `fencer routing` and
 * `fencer fleet status` drive the control plane as a user would: tables by
 * default, JSON with --json, the URL from --control-plane, from
 * FENCER_CONTROL_PLANE or from fleet.json's controlPlane.urls, errors as
 * messages with a non-zero exit code.
 * Method: the real app (one-member meta group, fake cells) listening on
 * 127.0.0.1 port 0, and the CLI's runCli() in-process with captured output.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliIo } from '@fencer/cli';
import { startHarness, type Harness } from './support/harness.js';

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

async function fencer(args: string[], env: Record<string, string> = {}, cwd = dir): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { stdout: (t) => void (out += t), stderr: (t) => void (err += t), env: { ...env }, cwd };
  const code = await runCli(['--timeout', '3s', ...args], io);
  return { code, out, err };
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
