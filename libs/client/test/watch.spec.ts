/**
 * Goal: watch() delivers a lock's (or a prefix's) events in revision order
 * across reconnects — resuming from the last revision it saw, so nothing is
 * missed and nothing repeats — and resyncs on COMPACTED: a 'resync' marker,
 * then current state (GetLock for a name, the server's snapshot for a
 * prefix), then live events again.
 * Method: the fake LockService records every Watch request; the test breaks
 * streams and compacts history between steps and compares the delivered
 * events with the fake's ground truth.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { lockservice } from '@fencer/protocol';
import { FencerClient, type WatchEventInfo } from '../src/index.js';
import { FakeLockService } from '../src/testing/index.js';

let fake: FakeLockService;
let writer: FencerClient;
let watcher: FencerClient;

beforeEach(async () => {
  fake = await FakeLockService.start();
  writer = new FencerClient({ endpoints: [fake.address], backoffBaseMs: 5, backoffMaxMs: 20 });
  watcher = new FencerClient({ endpoints: [fake.address], backoffBaseMs: 5, backoffMaxMs: 20 });
});

afterEach(async () => {
  await writer.close();
  await watcher.close();
  await fake.stop();
});

/** Pulls events from the iterator one at a time. */
function reader(it: AsyncGenerator<WatchEventInfo>): () => Promise<WatchEventInfo> {
  return async () => {
    const r = await it.next();
    if (r.done) throw new Error('the watch ended');
    return r.value;
  };
}

describe('watch', () => {
  it('starts with a snapshot and progress, then live events in order', async () => {
    const h = await writer.acquire('/ls/w/a');
    const ac = new AbortController();
    const next = reader(watcher.watch('/ls/w/a', { signal: ac.signal }));
    const snap = await next();
    expect(snap).toMatchObject({ type: 'snapshot', name: '/ls/w/a', revision: fake.revision });
    expect(snap.lock?.holders.map((x) => x.token)).toEqual([h.token]);
    expect(await next()).toMatchObject({ type: 'progress', revision: fake.revision });
    await h.release();
    const rel = await next();
    expect(rel).toMatchObject({ type: 'released', name: '/ls/w/a', token: h.token, revision: fake.revision });
    expect(rel.lock?.mode).toBe('free');
    ac.abort();
  });

  it('resumes from the last revision after a broken stream: no gap, no repeat', async () => {
    const ac = new AbortController();
    const it = watcher.watch('/ls/w/', { signal: ac.signal });
    const next = reader(it);
    await next(); // progress (nothing live yet)
    const seen: number[] = [];
    const h1 = await writer.acquire('/ls/w/x');
    seen.push((await next()).revision);
    fake.breakWatches();
    // Changes while the watcher is disconnected.
    await h1.release();
    const h2 = await writer.acquire('/ls/w/y');
    seen.push((await next()).revision);
    seen.push((await next()).revision);
    fake.breakWatches('SLOW_WATCHER');
    await h2.release();
    seen.push((await next()).revision);
    const watches = fake.callsOf('watch') as lockservice.WatchRequest[];
    // Resumed from just before the last revision seen (skipping what was delivered at it).
    expect(watches.map((w) => w.sinceRevision)).toEqual([0, seen[0]! - 1, seen[2]! - 1]);
    // Every change event the fake produced, exactly once, in order.
    expect(seen).toEqual([h1.token, h1.token + 1, h2.token, h2.token + 1]);
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });

  it('a watch from a given revision replays the history after it', async () => {
    const h = await writer.acquire('/ls/w/r');
    await h.release();
    const ac = new AbortController();
    const next = reader(watcher.watch('/ls/w/r', { sinceRevision: h.token - 1, signal: ac.signal }));
    expect(await next()).toMatchObject({ type: 'acquired', revision: h.token });
    expect(await next()).toMatchObject({ type: 'released', revision: h.token + 1 });
    ac.abort();
  });

  it('COMPACTED on a name: resync marker, GetLock snapshot, then live events from its revision', async () => {
    const h = await writer.acquire('/ls/w/c');
    const ac = new AbortController();
    const next = reader(watcher.watch('/ls/w/c', { sinceRevision: h.token, signal: ac.signal }));
    // The watcher falls behind: more happens, the history is compacted, the stream breaks.
    await h.release();
    expect(await next()).toMatchObject({ type: 'released', token: h.token });
    const h2 = await writer.acquire('/ls/w/c');
    fake.compactHistory();
    fake.breakWatches();
    const before: string[] = [];
    let e = await next();
    for (; e.type !== 'resync'; e = await next()) before.push(`${e.type} ${e.revision}`);
    // What arrived before the break, if anything, is the live acquire (already sent when the stream broke).
    expect(before.length === 0 || before[0] === `acquired ${h2.token}`).toBe(true);
    const snap = await next();
    expect(snap).toMatchObject({ type: 'snapshot', name: '/ls/w/c', revision: fake.revision });
    expect(snap.lock?.holders.map((x) => x.token)).toEqual([h2.token]);
    expect(fake.callsOf('getLock')).toHaveLength(1);
    await h2.release();
    expect(await next()).toMatchObject({ type: 'released', token: h2.token });
    const watches = fake.callsOf('watch') as lockservice.WatchRequest[];
    expect(watches[watches.length - 1]!.sinceRevision).toBe(snap.revision);
    ac.abort();
  });

  it('COMPACTED on a prefix: resync marker, then the server snapshot of every live lock', async () => {
    const a = await writer.acquire('/ls/w/p/a');
    const ac = new AbortController();
    const next = reader(watcher.watch('/ls/w/p/', { sinceRevision: a.token - 1, signal: ac.signal }));
    expect(await next()).toMatchObject({ type: 'acquired', name: '/ls/w/p/a' });
    const b = await writer.acquire('/ls/w/p/b');
    expect(await next()).toMatchObject({ type: 'acquired', name: '/ls/w/p/b' });
    fake.compactHistory();
    // Force a resume from a revision the fake no longer has.
    await writer.acquire('/ls/w/p/c');
    fake.compactHistory();
    fake.breakWatches();
    const events: WatchEventInfo[] = [];
    for (let e = await next(); e.type !== 'progress'; e = await next()) events.push(e);
    const resync = events.findIndex((e) => e.type === 'resync');
    expect(resync).toBeGreaterThanOrEqual(0);
    // Before the marker, at most the live acquire of c (sent before the stream broke).
    expect(events.slice(0, resync).map((e) => `${e.type} ${e.name}`)).toEqual(resync === 0 ? [] : ['acquired /ls/w/p/c']);
    expect(events.slice(resync + 1).map((e) => `${e.type} ${e.name}`)).toEqual([
      'snapshot /ls/w/p/a',
      'snapshot /ls/w/p/b',
      'snapshot /ls/w/p/c',
    ]);
    expect(b.token).toBeGreaterThan(a.token);
    ac.abort();
  });

  it("a break in the middle of one revision's events resumes with the rest of them, none twice", async () => {
    fake.revision = 10; // revision 1 cannot be resumed "from just before" (since 0 means a snapshot); a real cell's revision 1 is its blank entry
    const ac = new AbortController();
    const next = reader(watcher.watch('/ls/w/m/', { signal: ac.signal }));
    expect((await next()).type).toBe('progress');
    const R = fake.revision + 1;
    const ev = (name: string, type: lockservice.WatchEventType): lockservice.WatchEvent => ({
      revision: R,
      type,
      name,
      sessionId: 'w:s',
      token: R,
      lock: undefined,
    });
    // One entry released m/a and granted it to the head waiter: two events at R; a third at R follows later.
    fake.appendEvents([ev('/ls/w/m/a', 3), ev('/ls/w/m/a', 2)]);
    expect(await next()).toMatchObject({ type: 'released', revision: R });
    expect(await next()).toMatchObject({ type: 'acquired', revision: R });
    fake.breakWatches();
    fake.appendEvents([ev('/ls/w/m/b', 2)]); // written while the watcher is away
    expect(await next()).toMatchObject({ type: 'acquired', revision: R, name: '/ls/w/m/b' });
    const watches = fake.callsOf('watch') as lockservice.WatchRequest[];
    expect(watches[1]!.sinceRevision).toBe(R - 1);
    ac.abort();
  });

  it('a bad name fails the iteration instead of retrying', async () => {
    const it = watcher.watch('/ls/w/bad//name');
    await expect(it.next()).rejects.toMatchObject({ code: 'INVALID_NAME' });
  });
});
