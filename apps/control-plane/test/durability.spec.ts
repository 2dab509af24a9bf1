/**
 * Goal: the meta group's state survives a restart, through the WAL and
 * through snapshots with a compacted log; the admin token file and the
 * flags behave as the README says.
 * Method: a real one-member meta group on a temporary directory, snapshot
 * every 4 entries; 30 writes (creates, a delete, quota changes, a move, a
 * snapshot record, an Idempotency-Key), close, reopen on the same directory,
 * and compare every read and the next write's answer. Then
 * loadOrCreateAdminToken and parseConfig on temporary files.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadOrCreateAdminToken } from '../src/index.js';
import { parseConfig } from '../src/config.js';
import { call, startHarness } from './support/harness.js';

const dirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(path.join(tmpdir(), 'fencer-cp-dur-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('meta group durability', () => {
  it('restarts with the same tenants, routes, journal and idempotency answers, from a snapshot and the log after it', async () => {
    const dataDir = tmp();
    let h = await startHarness({ dataDir, snapshotEveryEntries: 4 });
    for (let i = 0; i < 24; i++)
      expect((await call(h.app, 'POST', '/v1/tenants', { namespace: `t${i}`, cell: i % 2 ? 'cell-1' : 'cell-2' })).statusCode).toBe(201);
    await call(h.app, 'DELETE', '/v1/tenants/t3?force=true');
    await call(h.app, 'PATCH', '/v1/tenants/t4', { quotas: { maxLocks: 4 } });
    const move = (await call(h.app, 'POST', '/v1/moves', { namespace: 't4', toCell: 'cell-1' })).json();
    expect(move.state).toBe('queued');
    await call(h.app, 'POST', '/v1/cells/cell-1/snapshots');
    const keyed = await call(h.app, 'POST', '/v1/tenants', { namespace: 'keyed', cell: 'cell-1' }, { 'idempotency-key': 'k-durable' });
    const before = {
      tenants: recorded((await call(h.app, 'GET', '/v1/tenants')).json()),
      routing: (await call(h.app, 'GET', '/v1/routing')).json(),
      moves: (await call(h.app, 'GET', '/v1/moves')).json(),
      snapshots: (await call(h.app, 'GET', '/v1/cells/cell-1/snapshots')).json(),
    };
    expect(h.group.replica.latestSnapshotIndex).toBeGreaterThan(0);
    await h.close();

    h = await startHarness({ dataDir, snapshotEveryEntries: 4 });
    try {
      expect(recorded((await call(h.app, 'GET', '/v1/tenants')).json())).toEqual(before.tenants);
      expect((await call(h.app, 'GET', '/v1/routing')).json()).toEqual(before.routing);
      expect((await call(h.app, 'GET', '/v1/moves')).json()).toEqual(before.moves);
      expect((await call(h.app, 'GET', '/v1/cells/cell-1/snapshots')).json()).toEqual(before.snapshots);
      const got = await call(h.app, 'GET', `/v1/moves/${move.id}`);
      expect(got.json().state, got.body).toBe('queued');
      const replay = await call(h.app, 'POST', '/v1/tenants', { namespace: 'keyed', cell: 'cell-1' }, { 'idempotency-key': 'k-durable' });
      expect([replay.statusCode, replay.json().createdAt]).toEqual([201, keyed.json().createdAt]);
      expect(before.routing.version).toBe(24 + 1 + 1);
      expect((await call(h.app, 'POST', '/v1/tenants', { namespace: 'after', cell: 'cell-1' })).statusCode).toBe(201);
      expect((await call(h.app, 'GET', '/v1/routing')).json().version).toBe(before.routing.version + 1);
    } finally {
      await h.close();
    }
  }, 60_000);
});

describe('admin token and flags', () => {
  it('creates the admin token once, mode 0600, and keeps it across starts', () => {
    const file = path.join(tmp(), 'admin-token');
    const first = loadOrCreateAdminToken(file);
    expect(first).toMatch(/^fencer_admin_[A-Za-z0-9_-]{43}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(loadOrCreateAdminToken(file)).toBe(first);
    writeFileSync(file, '');
    expect(() => loadOrCreateAdminToken(file)).toThrow(/empty/);
  });

  it('parses the flags, reads the cells from a fleet.json, and refuses members without URLs', () => {
    const fleet = path.join(tmp(), 'fleet.json');
    writeFileSync(
      fleet,
      JSON.stringify({
        lockService: [],
        cells: [{ id: 'cell-1', replicas: [{ id: 'r1', grpc: '127.0.0.1:7001', admin: '127.0.0.1:7101', pid: 5 }] }],
      }),
    );
    const c = parseConfig(['--id', 'cp1', '--cells-file', fleet, '--auth', '--listen', '127.0.0.1:7401'], {});
    expect(c.cells).toEqual([{ id: 'cell-1', replicas: [{ id: 'r1', grpc: '127.0.0.1:7001', admin: '127.0.0.1:7101' }] }]);
    expect(c.auth).toBe(true);
    expect(c.urls.get(c.id)).toBe('http://127.0.0.1:7401');
    expect([...c.peers.keys()]).toEqual(['cp1']);
    expect(() => parseConfig(['--id', 'cp1', '--peers', 'cp1=127.0.0.1:1,cp2=127.0.0.1:2'], {})).toThrow(/no HTTP URL for member cp2/);
    expect(() => parseConfig(['--id', 'cp1', '--peers', 'cp2=127.0.0.1:2', '--urls', 'cp2=http://x:1'], {})).toThrow(
      /must list this instance/,
    );
    expect(parseConfig([], { FENCER_CP_ID: 'envid' }).id).toBe('envid');
    expect(readFileSync(fleet, 'utf8')).toContain('cell-1');
  });
});

/** A tenant list as the meta group records it: `usage` is read live from the cells (the harness's fake cells start empty again). */
function recorded(list: { tenants: Array<Record<string, unknown>> }): { tenants: Array<Record<string, unknown>> } {
  return { tenants: list.tenants.map(({ usage: _usage, ...rest }) => rest) };
}
