/**
 * Goal: the store keeps what it acknowledged across restarts, and its read
 * view follows Raft's storage contract. Method: drive openRaftLogStore over
 * MemDisk, draining its completion queue, then reopen and compare.
 */
import { LogIndex, SeededRandom, Term } from '@fencer/base';
import { describe, expect, it } from 'vitest';
import { MemDisk, type WalStore, openRaftLogStore } from '../src/index.js';
import { allEntries, entry, hs, open, openOk, run, snapshotAt, text } from './helpers.js';

describe('store basics', () => {
  it('starts empty', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    expect(store.firstIndex()).toBe(1);
    expect(store.lastIndex()).toBe(0);
    expect(store.term(LogIndex(0))).toBe(0);
    expect(store.initialState().hardState).toEqual(hs(0, null, 0));
    expect(store.snapshot().meta.index).toBe(0);
  });

  it('keeps saved entries and hard state across a crash', () => {
    const disk = new MemDisk();
    const store = openOk(disk, { segmentBytesMax: 4096 });
    for (let i = 1; i <= 100; i++) {
      expect(run(disk, (d) => store.save(hs(2, 'b', i - 1), [entry(i, i < 50 ? 1 : 2)], d))).toBeNull();
    }
    expect(store.stats.segmentsRolled).toBeGreaterThan(0);
    disk.crash();
    const again = openOk(disk, { segmentBytesMax: 4096 });
    expect(again.lastIndex()).toBe(100);
    expect(again.initialState().hardState).toEqual(hs(2, 'b', 99));
    expect(allEntries(again).map(text)).toEqual(Array.from({ length: 100 }, (_, k) => `e${k + 1}`));
    expect(again.term(LogIndex(49))).toBe(1);
    expect(again.term(LogIndex(50))).toBe(2);
  });

  it('loses nothing acknowledged when unsynced writes are lost', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    expect(run(disk, (d) => store.save(hs(1, 'a', 0), [entry(1, 1), entry(2, 1)], d))).toBeNull();
    store.save(undefined, [entry(3, 1)], () => {});
    disk.crash(); // before the write of entry 3 completed
    const again = openOk(disk);
    expect(again.lastIndex()).toBe(2);
  });

  it('truncates a suffix when a save starts inside the log', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    run(disk, (d) => store.save(undefined, [entry(1, 1), entry(2, 1), entry(3, 1)], d));
    run(disk, (d) => store.save(hs(2, null, 1), [entry(2, 2, 'x2')], d));
    expect(store.lastIndex()).toBe(2);
    disk.crash();
    const again = openOk(disk);
    expect(allEntries(again).map(text)).toEqual(['e1', 'x2']);
    expect(again.term(LogIndex(2))).toBe(2);
  });

  it('group commit: many saves in flight share fsyncs, callbacks in call order', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    const order: number[] = [];
    const syncsBefore = disk.stats.syncs;
    for (let i = 1; i <= 200; i++) store.save(undefined, [entry(i, 1)], () => order.push(i));
    disk.runPending();
    expect(order).toEqual(Array.from({ length: 200 }, (_, k) => k + 1));
    // The first save starts a cycle; the other 199 wait for it and ride the next one.
    expect(disk.stats.syncs - syncsBefore).toBeLessThanOrEqual(3);
  });

  it('entries() honours the byte limit but returns at least one', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    run(disk, (d) => store.save(undefined, [entry(1, 1, 'aaaa'), entry(2, 1, 'bbbb'), entry(3, 1, 'cccc')], d));
    expect(store.entries(LogIndex(1), LogIndex(4), 0).length).toBe(1);
    expect(store.entries(LogIndex(1), LogIndex(4), 8).length).toBe(2);
    expect(store.entries(LogIndex(2), LogIndex(4), 100).map(text)).toEqual(['bbbb', 'cccc']);
  });

  it('snapshots compact the read view and survive restarts', () => {
    const disk = new MemDisk();
    const store = openOk(disk, { segmentBytesMax: 4096 });
    for (let i = 1; i <= 300; i++) run(disk, (d) => store.save(hs(1, null, i), [entry(i, 1)], d));
    expect(run(disk, (d) => store.saveSnapshot(snapshotAt(100, 1), d))).toBeNull();
    expect(store.firstIndex()).toBe(101);
    expect(store.term(LogIndex(100))).toBe(1);
    expect(run(disk, (d) => store.saveSnapshot(snapshotAt(250, 1), d))).toBeNull();
    expect(store.stats.segmentsDeleted).toBeGreaterThan(0);
    disk.crash();
    const again = openOk(disk, { segmentBytesMax: 4096 });
    expect(again.snapshot().meta.index).toBe(250);
    expect(again.firstIndex()).toBe(251);
    expect(again.lastIndex()).toBe(300);
    expect(again.initialState().hardState).toEqual(hs(1, null, 300));
  });

  it('a snapshot that does not match the log replaces it', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    run(disk, (d) => store.save(undefined, [entry(1, 1), entry(2, 1), entry(3, 1)], d));
    expect(run(disk, (d) => store.saveSnapshot(snapshotAt(10, 3), d))).toBeNull();
    expect(store.firstIndex()).toBe(11);
    expect(store.lastIndex()).toBe(10);
    run(disk, (d) => store.save(hs(3, null, 11), [entry(11, 3)], d));
    disk.crash();
    const again = openOk(disk);
    expect(again.snapshot().meta.index).toBe(10);
    expect(allEntries(again).map((e) => e.index)).toEqual([11]);
    expect(again.term(LogIndex(10))).toBe(Term(3));
  });

  it('an fsync error fails the save and every later one, without retrying', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    run(disk, (d) => store.save(undefined, [entry(1, 1)], d));
    disk.failNext('sync', { match: '.wal' });
    const syncs = disk.stats.syncs;
    const errA = run(disk, (d) => store.save(undefined, [entry(2, 1)], d));
    expect(errA?.message).toMatch(/EIO/);
    expect(disk.stats.syncs - syncs).toBe(1);
    const errB = run(disk, (d) => store.save(undefined, [entry(3, 1)], d));
    expect(errB).toBe(errA);
    expect(disk.stats.syncs - syncs).toBe(1);
    disk.crash();
    expect(open(disk).store?.lastIndex()).toBe(1);
  });

  it('with two fsyncs in flight, a later one finishing first acknowledges nothing until the earlier one succeeds', () => {
    const queue: Array<() => void> = [];
    const disk = new MemDisk({ schedule: (_delayMs, fn) => queue.push(fn) });
    const drain = (): void => {
      while (queue.length > 0) queue.shift()!();
    };
    openRaftLogStore(disk, '/d', { segmentBytesMax: 65536, syncsInFlightMax: 2 }, () => {});
    drain();
    const store = (() => {
      let s: WalStore | undefined;
      openRaftLogStore(disk, '/d', { segmentBytesMax: 65536, syncsInFlightMax: 2 }, (_e, st) => (s = st));
      drain();
      return s!;
    })();
    const results: Array<[string, Error | null]> = [];
    store.save(undefined, [entry(1, 1)], (err) => results.push(['a', err]));
    expect(queue.length).toBe(1); // A's write
    disk.failNext('sync');
    queue.shift()!(); // A's write completes; A's fsync is issued (and will fail)
    store.save(undefined, [entry(2, 1)], (err) => results.push(['b', err]));
    queue.splice(1, 1)[0]!(); // B's write completes; B's fsync is issued
    expect(queue.length).toBe(2);
    queue.splice(1, 1)[0]!(); // B's fsync succeeds first...
    expect(results).toEqual([]); // ...but says nothing about A's
    queue.shift()!(); // A's fsync fails
    expect(results.map(([who, err]) => [who, err?.message.startsWith('EIO: sync /d/0000000000000001.wal')])).toEqual([
      ['a', true],
      ['b', true],
    ]);
  });

  it('with two fsyncs in flight, a crash that keeps the later write and loses the earlier recovers the prefix', () => {
    const outcomes = new Set<string>();
    for (let seed = 1; seed <= 40; seed++) {
      const disk = new MemDisk();
      const store = openOk(disk, { segmentBytesMax: 65536, syncsInFlightMax: 2 });
      run(disk, (d) => store.save(hs(1, 'a', 0), [entry(1, 1, 'one')], d));
      const big = 'y'.repeat(300);
      store.save(hs(1, 'a', 1), [entry(2, 1, big)], () => {}); // cycle A: its write is issued at once
      store.save(hs(1, 'a', 2), [entry(3, 1, big)], () => {}); // cycle B: the second slot, at once too
      disk.crash({ mode: 'random', random: new SeededRandom(seed), reorder: true });
      const again = openOk(disk, { segmentBytesMax: 65536, syncsInFlightMax: 2 });
      const got = allEntries(again).map((e) => e.index);
      // Always a prefix: entry 3 never without entry 2.
      expect([[1], [1, 2], [1, 2, 3]]).toContainEqual(got);
      outcomes.add(
        again.recovery.truncatedAt?.reason.includes('later cycle') === true ? 'later-cycle-discarded' : `last-${again.lastIndex()}`,
      );
    }
    expect(outcomes).toContain('later-cycle-discarded');
    expect(outcomes).toContain('last-3');
  });

  it('an fsync error while a snapshot waits for the log fails the snapshot too', () => {
    const disk = new MemDisk();
    const store = openOk(disk);
    run(disk, (d) => store.save(hs(1, 'a', 2), [entry(1, 1), entry(2, 1)], d));
    const results: Array<Error | null> = [];
    store.save(hs(1, 'a', 3), [entry(3, 1)], (err) => results.push(err));
    disk.failNext('sync', { match: '.wal' });
    store.saveSnapshot(snapshotAt(3, 1), (err) => results.push(err));
    disk.runPending();
    expect(results.map((e) => e?.message.slice(0, 3))).toEqual(['EIO', 'EIO']);
    let closed: Error | null | undefined;
    store.close((err) => (closed = err));
    disk.runPending();
    expect(closed).toBeNull();
  });
});
