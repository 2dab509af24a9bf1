/**
 * Goal: Watch resumes from any retained revision with nothing skipped and
 * nothing repeated; too old a revision is COMPACTED; a slow watcher is ended
 * instead of growing memory; idle watchers get PROGRESS.
 * Method: publish synthetic events into a small hub and record what sinks get.
 */
import { describe, expect, it } from 'vitest';
import { RequestId, Revision, SessionId } from '@fencer/base';
import type { LockEvent, LockState } from '@fencer/lock-fsm';
import { type HubEvent, WatchHub, type WatchSink } from './watch-hub.js';

const free = (name: string): LockState => ({ name, mode: null, holders: [], waiters: [], delayed: false });
const ev = (revision: number, name: string): LockEvent => ({
  type: 'ACQUIRED',
  revision: Revision(revision),
  name,
  sessionId: SessionId('ns:1'),
  token: Revision(revision),
  requestId: RequestId(`r${revision}`),
  lock: free(name),
});

function recorder(buffered = () => 0): WatchSink & { got: HubEvent[]; ended?: string } {
  const sink = {
    got: [] as HubEvent[],
    ended: undefined as string | undefined,
    write(e: HubEvent) {
      sink.got.push(e);
      return buffered();
    },
    end(reason?: string) {
      sink.ended = reason ?? 'end';
    },
  };
  return sink;
}

const revisions = (s: { got: HubEvent[] }): number[] => s.got.map((e) => (e.type === 'event' ? e.event.revision : e.revision));

const opts = { historyMax: 5, watcherBufferMax: 3, watchersMax: 10, progressIntervalMs: 1000 };

describe('WatchHub: history and resume', () => {
  it('resumes from every retained revision without gaps or repeats', () => {
    for (let since = 1; since <= 5; since++) {
      const hub = new WatchHub(opts);
      for (let r = 1; r <= 5; r++) hub.publish(r, [ev(r, r % 2 ? '/ls/ns/a' : '/ls/ns/b')]);
      const s = recorder();
      expect(hub.subscribe({ name: '/ls/ns/', prefix: true }, since, s, 0, () => [])).toBe('ok');
      hub.publish(5 + since, [ev(5 + since, '/ls/ns/a')]);
      expect(revisions(s)).toEqual([...Array.from({ length: 5 - since }, (_, i) => since + 1 + i), 5 + since]);
    }
  });

  it('a replica behind the resume revision sends nothing at or below it, events or PROGRESS (found by the chaos harness)', () => {
    // A watcher resumes at 7 on a replica that has applied only up to 4 (it was paused): as it catches
    // up it must not deliver 5..7 again, nor a PROGRESS below 7.
    const hub = new WatchHub(opts);
    for (let r = 1; r <= 4; r++) hub.publish(r, [ev(r, '/ls/ns/a')]);
    const s = recorder();
    expect(hub.subscribe({ name: '/ls/ns/', prefix: true }, 7, s, 0, () => [])).toBe('ok');
    hub.tick(5_000);
    for (let r = 5; r <= 9; r++) hub.publish(r, [ev(r, '/ls/ns/a')]);
    hub.tick(10_000);
    expect(revisions(s)).toEqual([8, 9, 9]);
  });

  it('a snapshot installed under a watcher ends it: the events it replaced were never sent (found reading the hub for the chaos harness)', () => {
    const hub = new WatchHub(opts);
    hub.publish(1, [ev(1, '/ls/ns/a')]);
    const s = recorder();
    expect(hub.subscribe({ name: '/ls/ns/', prefix: true }, 1, s, 0, () => [])).toBe('ok');
    // The leader sends a snapshot at 6: events 2..6 never reach this replica's hub.
    hub.reset(6);
    hub.publish(7, [ev(7, '/ls/ns/a')]);
    expect(s.ended).toBeDefined();
    expect(revisions(s)).toEqual([]);
  });

  it('answers COMPACTED below what the ring still holds', () => {
    const hub = new WatchHub(opts);
    for (let r = 1; r <= 8; r++) hub.publish(r, [ev(r, '/ls/ns/a')]);
    // Ring of 5 holds 4..8: resuming after 3 is fine, after 2 is not.
    expect(hub.floorRevision).toBe(3);
    expect(hub.subscribe({ name: '/ls/ns/a', prefix: false }, 2, recorder(), 0, () => [])).toBe('compacted');
    const s = recorder();
    expect(hub.subscribe({ name: '/ls/ns/a', prefix: false }, 3, s, 0, () => [])).toBe('ok');
    expect(revisions(s)).toEqual([4, 5, 6, 7, 8]);
  });

  it('after a snapshot restore, history before it is gone', () => {
    const hub = new WatchHub(opts);
    hub.publish(1, [ev(1, '/ls/ns/a')]);
    hub.reset(50);
    expect(hub.subscribe({ name: '/ls/ns/a', prefix: false }, 1, recorder(), 0, () => [])).toBe('compacted');
    expect(hub.subscribe({ name: '/ls/ns/a', prefix: false }, 50, recorder(), 0, () => [])).toBe('ok');
  });
});

describe('WatchHub: starting, filtering and sending', () => {
  it('starts from now with SNAPSHOT events then PROGRESS', () => {
    const hub = new WatchHub(opts);
    hub.publish(4, [ev(4, '/ls/ns/a')]);
    const s = recorder();
    hub.subscribe({ name: '/ls/ns/', prefix: true }, 0, s, 0, () => [free('/ls/ns/a'), free('/ls/ns/b')]);
    expect(s.got.map((e) => e.type)).toEqual(['snapshot', 'snapshot', 'progress']);
    expect(revisions(s)).toEqual([4, 4, 4]);
  });

  it('filters by exact name or prefix', () => {
    const hub = new WatchHub(opts);
    const exact = recorder();
    const prefix = recorder();
    hub.subscribe({ name: '/ls/ns/a', prefix: false }, 0, exact, 0, () => []);
    hub.subscribe({ name: '/ls/ns/a', prefix: true }, 0, prefix, 0, () => []);
    hub.publish(1, [ev(1, '/ls/ns/a'), ev(1, '/ls/ns/ab'), ev(1, '/ls/ns/b')]);
    expect(exact.got.filter((e) => e.type === 'event').length).toBe(1);
    expect(prefix.got.filter((e) => e.type === 'event').length).toBe(2);
  });

  it('ends a watcher whose buffer passes the limit', () => {
    const hub = new WatchHub(opts);
    let buffered = 0;
    const s = recorder(() => buffered++);
    hub.subscribe({ name: '/ls/ns/', prefix: true }, 0, s, 0, () => []);
    for (let r = 1; r <= 10; r++) hub.publish(r, [ev(r, '/ls/ns/a')]);
    expect(s.ended).toBe('slow');
    expect(hub.watcherCount).toBe(0);
  });

  it('sends PROGRESS only to watchers idle for the interval', () => {
    const hub = new WatchHub(opts);
    const idle = recorder();
    const busy = recorder();
    hub.subscribe({ name: '/ls/ns/a', prefix: false }, 0, idle, 0, () => []);
    hub.subscribe({ name: '/ls/ns/b', prefix: false }, 0, busy, 0, () => []);
    hub.tick(900);
    hub.publish(1, [ev(1, '/ls/ns/b')]);
    hub.tick(1000);
    expect(idle.got.map((e) => e.type)).toEqual(['progress', 'progress']);
    expect(busy.got.map((e) => e.type)).toEqual(['progress', 'event']);
  });
});
