/**
 * Goal: the dashboard's server side. The page and every file it loads are
 * served from this instance (nothing from another host); the event stream
 * refuses a missing or unknown token (401) and a tenant token asking for
 * another tenant (403), gives the admin the whole fleet and a tenant token
 * its own tenant only; a tenant's live locks follow Watch events, drop a
 * freed lock, start over on 'resync', and move to the tenant's new cell
 * when its route changes; the read-index route answers on the leader.
 * Method: the real app on a one-member meta group with fake cells
 * (support/harness.ts), auth on, listening on 127.0.0.1 port 0; the stream
 * is read with fetch as the page reads it. The lock-service client is a
 * fake whose events the test pushes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetEvent, LocksEvent } from '@fencer/dashboard-ui';
import type { WatchClient, WatchClientFactory } from '../src/index.js';
import type { WatchEventInfo } from '@fencer/client';
import { startHarness, type Harness } from './support/harness.js';

const ADMIN = 'dashboard-admin-token';
const admin = { authorization: `Bearer ${ADMIN}` };
const eventWaitMs = 10_000;

/** A watch the test feeds: one per client made, with the endpoints it was made for. */
class FakeWatch implements WatchClient {
  readonly queue: WatchEventInfo[] = [];
  private wake: (() => void) | undefined;
  closed = false;
  constructor(readonly endpoints: readonly string[]) {}
  push(ev: WatchEventInfo): void {
    this.queue.push(ev);
    this.wake?.();
  }
  async *watch(_prefix: string, options: { signal: AbortSignal }): AsyncIterable<WatchEventInfo> {
    options.signal.addEventListener('abort', () => this.wake?.());
    while (!options.signal.aborted) {
      const ev = this.queue.shift();
      if (ev !== undefined) yield ev;
      else await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const watches: FakeWatch[] = [];
const newWatchClient: WatchClientFactory = (endpoints) => {
  const w = new FakeWatch(endpoints);
  watches.push(w);
  return w;
};

let h: Harness;
let url = '';
beforeAll(async () => {
  h = await startHarness({ adminToken: ADMIN, newWatchClient });
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await h?.close();
});

interface Events {
  next<T>(name: string, ok?: (data: T) => boolean): Promise<T>;
  close(): void;
}

/** Opens the stream as the page does (fetch, Authorization header) and hands out its events by name. */
async function openEvents(query: string, headers: Record<string, string>): Promise<Events> {
  const abort = new AbortController();
  const res = await fetch(`${url}/v1/dashboard/events${query}`, { headers, signal: abort.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const seen: { name: string; data: unknown }[] = [];
  const readMore = async (): Promise<void> => {
    const { value, done } = await reader.read();
    if (done) throw new Error('the stream ended');
    buffer += value;
    for (let at = buffer.indexOf('\n\n'); at >= 0; at = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const name = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (name && data) seen.push({ name, data: JSON.parse(data) });
    }
  };
  return {
    async next<T>(name: string, ok: (data: T) => boolean = () => true): Promise<T> {
      const deadline = Date.now() + eventWaitMs;
      for (;;) {
        const i = seen.findIndex((e) => e.name === name && ok(e.data as T));
        if (i >= 0) return seen.splice(0, i + 1).pop()!.data as T;
        seen.length = 0;
        if (Date.now() > deadline) throw new Error(`no ${name} event within ${eventWaitMs} ms`);
        await readMore();
      }
    },
    close: () => abort.abort(),
  };
}

async function createTenant(namespace: string, cell: string): Promise<string> {
  const res = await fetch(`${url}/v1/tenants`, {
    method: 'POST',
    headers: { ...admin, 'content-type': 'application/json' },
    body: JSON.stringify({ namespace, cell, quotas: { maxLocks: 10 } }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { token: string }).token;
}

const lock = (name: string, token: number, sessionId = 's1') => ({
  name,
  mode: 'exclusive' as const,
  holders: [{ sessionId, token, mode: 'exclusive' as const, clientId: 'c1' }],
  waiters: [{ sessionId: 's2', mode: 'exclusive' as const, requestId: 'r', clientId: 'c2' }],
  delayed: false,
});

describe('the dashboard page', () => {
  it('is served at / with every script it loads served here, from paths of this server only', async () => {
    const res = await fetch(`${url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    const map = JSON.parse(/<script type="importmap">(.*?)<\/script>/s.exec(html)![1]!) as { imports: Record<string, string> };
    const entry = /<script type="module" src="([^"]+)"/.exec(html)![1]!;
    const urls = [entry, ...Object.values(map.imports)];
    expect(urls.every((u) => u.startsWith('/ui/'))).toBe(true);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    for (const u of urls) {
      const asset = await fetch(`${url}${u}`);
      expect(asset.status, u).toBe(200);
      expect(asset.headers.get('content-type'), u).toMatch(/^text\/javascript/);
    }
    // The entry's own imports are relative (./x.js) or the import map's names.
    const main = await (await fetch(`${url}${entry}`)).text();
    for (const m of main.matchAll(/^import .* from ['"]([^'"]+)['"]/gm))
      expect(m[1]!.startsWith('./') || m[1]! in map.imports, m[1]).toBe(true);
  });
});

describe('the event stream', () => {
  it('refuses no token and an unknown one (401), a bad query (400), another tenant (403) and an unknown one (404)', async () => {
    const tenantToken = await createTenant('alpha', 'cell-1');
    await createTenant('beta', 'cell-2');
    const status = async (query: string, headers: Record<string, string>) => {
      const res = await fetch(`${url}/v1/dashboard/events${query}`, { headers });
      const body = (await res.json()) as { code: string };
      return `${res.status} ${body.code}`;
    };
    expect(await status('', {})).toBe('401 UNAUTHENTICATED');
    expect(await status('', { authorization: 'Bearer nope' })).toBe('401 UNAUTHENTICATED');
    expect(await status('?cell=cell-1', admin)).toBe('400 INVALID_REQUEST');
    expect(await status('?namespace=beta', { authorization: `Bearer ${tenantToken}` })).toBe('403 FORBIDDEN');
    expect(await status('?namespace=nobody', admin)).toBe('404 TENANT_NOT_FOUND');
  });

  it('gives the admin every cell, tenant, move and snapshot; a tenant token its own tenant only', async () => {
    const gammaToken = await createTenant('gamma', 'cell-2');
    const all = await openEvents('', admin);
    const fleet = await all.next<FleetEvent>('fleet', (f) => f.tenants.some((t) => t.namespace === 'gamma'));
    all.close();
    expect(fleet.scope).toEqual({ admin: true });
    expect(fleet.instance).toEqual({ id: 'control-plane', leader: true });
    expect(fleet.cells.map((c) => c.id)).toEqual(['cell-1', 'cell-2']);
    expect(fleet.cells[0]!.health).toBe('degraded'); // a leader, and a replica unreachable
    expect(fleet.cells[0]!.replicas.map((r) => r.health)).toEqual(['ok', 'down']);
    expect(fleet.tenants.find((t) => t.namespace === 'gamma')).toMatchObject({ cell: 'cell-2', quotas: { maxLocks: 10 }, moving: false });

    const own = await openEvents('', { authorization: `Bearer ${gammaToken}` });
    const mine = await own.next<FleetEvent>('fleet');
    own.close();
    expect(mine.scope).toEqual({ admin: false, namespace: 'gamma' });
    expect(mine.cells).toEqual([]);
    expect(mine.tenants.map((t) => t.namespace)).toEqual(['gamma']);
    expect(mine.moves).toEqual([]);
  });

  it("keeps a tenant's live locks from Watch and follows the tenant to its new cell", async () => {
    const token = await createTenant('delta', 'cell-1');
    const events = await openEvents('?namespace=delta', { authorization: `Bearer ${token}` });
    await events.next<LocksEvent>('locks', (e) => e.cell === 'cell-1');
    const first = watches.at(-1)!;
    expect(first.endpoints).toEqual(['127.0.0.1:7001', '127.0.0.1:7101']);
    first.push({ type: 'snapshot', revision: 5, name: '/ls/delta/a', sessionId: '', token: 0, lock: lock('/ls/delta/a', 7) });
    first.push({ type: 'progress', revision: 5, name: '', sessionId: '', token: 0 });
    const shown = await events.next<LocksEvent>('locks', (e) => e.locks.length === 1);
    expect(shown.locks[0]).toEqual({
      name: '/ls/delta/a',
      holders: [{ sessionId: 's1', clientId: 'c1', token: 7, mode: 'exclusive' }],
      waiters: [{ sessionId: 's2', clientId: 'c2', mode: 'exclusive' }],
    });
    const free = { ...lock('/ls/delta/a', 7), holders: [], waiters: [], mode: 'free' as const };
    first.push({ type: 'released', revision: 6, name: '/ls/delta/a', sessionId: 's1', token: 7, lock: free });
    expect((await events.next<LocksEvent>('locks', (e) => e.revision === 6)).locks).toEqual([]);

    // The route moves: the watch on cell-1 ends, one on cell-2 starts, and shows that cell's locks.
    await h.group.write({ command: { kind: 'StartMove', id: 'mv-delta', namespace: 'delta', toCell: 'cell-2', atMs: Date.now() } });
    for (const state of ['freezing', 'copying', 'switching'] as const)
      await h.group.write({ command: { kind: 'AdvanceMove', id: 'mv-delta', state, atMs: Date.now() } });
    await events.next<LocksEvent>('locks', (e) => e.cell === 'cell-2');
    const second = watches.at(-1)!;
    expect(second).not.toBe(first);
    expect(second.endpoints).toEqual(['127.0.0.1:7002', '127.0.0.1:7102']);
    second.push({ type: 'snapshot', revision: 9, name: '/ls/delta/b', sessionId: '', token: 0, lock: lock('/ls/delta/b', 8) });
    expect((await events.next<LocksEvent>('locks', (e) => e.locks.length === 1)).locks[0]!.name).toBe('/ls/delta/b');
    second.push({ type: 'resync', revision: 9, name: '', sessionId: '', token: 0 });
    expect((await events.next<LocksEvent>('locks', (e) => e.locks.length === 0)).cell).toBe('cell-2');
    events.close();
  });

  it("has one read index, the group's internal one: the leader answers it to a member (the admin token), the dashboard has none of its own", async () => {
    const res = await fetch(`${url}/v1/internal/read-index`, { headers: admin });
    expect(res.status).toBe(200);
    const { index } = (await res.json()) as { index: number };
    expect(index).toBe(h.group.state.appliedIndex);
    expect((await fetch(`${url}/v1/internal/read-index`)).status).toBe(401);
    expect((await fetch(`${url}/v1/dashboard/read-index`)).status).toBe(404);
  });
});
