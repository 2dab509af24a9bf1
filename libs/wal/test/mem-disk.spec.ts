/**
 * Goal: MemDisk loses exactly what a power cut may lose, so tests built on
 * it mean something. Method: write, sync or not, crash, and read back; one
 * case per fault the simulator relies on.
 */
import { SeededRandom } from '@fencer/base';
import { describe, expect, it } from 'vitest';
import { type DiskFile, MemDisk } from '../src/index.js';

const bytes = (...v: number[]): Uint8Array => Uint8Array.from(v);

function openFile(disk: MemDisk, path: string): DiskFile {
  let file: DiskFile | undefined;
  disk.open(path, 'create', (err, f) => {
    expect(err).toBeNull();
    file = f;
  });
  disk.runPending();
  return file!;
}

function call(disk: MemDisk, fn: (done: (err: Error | null) => void) => void): Error | null {
  let result: Error | null | undefined;
  fn((err) => (result = err));
  disk.runPending();
  expect(result).not.toBeUndefined();
  return result!;
}

describe('MemDisk', () => {
  it('completes nothing inside the call that started it', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/a');
    let done = false;
    f.write(0, bytes(1), () => (done = true));
    expect(done).toBe(false);
    expect(disk.pendingCount).toBe(1);
    disk.runPending();
    expect(done).toBe(true);
  });

  it('uses an injected scheduler with per-operation delays', () => {
    const calls: Array<[number, () => void]> = [];
    const disk = new MemDisk({ schedule: (delayMs, fn) => calls.push([delayMs, fn]), delayMs: (op) => (op === 'sync' ? 5 : 1) });
    disk.mkdirp('/d');
    disk.open('/d/a', 'create', () => {});
    expect(calls.map(([d]) => d)).toEqual([1]);
    expect(disk.pendingCount).toBe(0);
  });

  it('loses unsynced writes on a crash and keeps synced ones', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/a');
    call(disk, (d) => disk.syncDir('/d', d));
    call(disk, (d) => f.write(0, bytes(1, 2, 3), d));
    call(disk, (d) => f.sync(d));
    call(disk, (d) => f.write(3, bytes(4, 5), d));
    expect(disk.read('/d/a')).toEqual(bytes(1, 2, 3, 4, 5));
    disk.crash();
    expect(disk.read('/d/a')).toEqual(bytes(1, 2, 3));
  });

  it('loses a file whose directory entry was never synced', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/a');
    call(disk, (d) => f.write(0, bytes(1), d));
    call(disk, (d) => f.sync(d));
    disk.crash();
    expect(disk.exists('/d/a')).toBe(false);
  });

  it('reverts a rename that was not followed by a directory sync', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/tmp');
    call(disk, (d) => f.write(0, bytes(7), d));
    call(disk, (d) => f.sync(d));
    call(disk, (d) => disk.syncDir('/d', d));
    call(disk, (d) => disk.rename('/d/tmp', '/d/final', d));
    expect(disk.list('/d')).toEqual(['final']);
    disk.crash();
    expect(disk.list('/d')).toEqual(['tmp']);
    call(disk, (d) => disk.rename('/d/tmp', '/d/final', d));
    call(disk, (d) => disk.syncDir('/d', d));
    disk.crash();
    expect(disk.list('/d')).toEqual(['final']);
    expect(disk.read('/d/final')).toEqual(bytes(7));
  });

  it('tears the first lost write in random mode: a prefix of it lands', () => {
    const seen = new Set<number>();
    for (let seed = 1; seed <= 60; seed++) {
      const disk = new MemDisk();
      disk.mkdirp('/d');
      const f = openFile(disk, '/d/a');
      call(disk, (d) => disk.syncDir('/d', d));
      f.write(0, bytes(1, 1, 1, 1), () => {});
      f.write(4, bytes(2, 2, 2, 2), () => {});
      disk.runPending();
      disk.crash({ mode: 'random', random: new SeededRandom(seed), tearChance: 1 });
      const got = disk.read('/d/a');
      // Always a prefix of the write sequence, never bytes out of order.
      const full = bytes(1, 1, 1, 1, 2, 2, 2, 2);
      expect(full.subarray(0, got.length)).toEqual(got);
      seen.add(got.length);
    }
    expect(seen.size).toBeGreaterThan(4);
  });

  it('a failed fsync drops the writes it covered for good (fsyncgate)', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/a');
    call(disk, (d) => disk.syncDir('/d', d));
    call(disk, (d) => f.write(0, bytes(9, 9), d));
    disk.failNext('sync');
    expect(call(disk, (d) => f.sync(d))?.message).toMatch(/EIO/);
    // A retry "succeeds", yet the data is not durable: why the WAL never retries.
    expect(call(disk, (d) => f.sync(d))).toBeNull();
    disk.crash();
    expect(disk.read('/d/a')).toEqual(new Uint8Array(0));
  });

  it('drops completions that were pending at a crash and refuses stale handles', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/a');
    let fired = false;
    f.write(0, bytes(1), () => (fired = true));
    disk.crash();
    disk.runPending();
    expect(fired).toBe(false);
    expect(() => f.write(0, bytes(1), () => {})).toThrow(/before a crash/);
  });

  it('allocates sparse zero-filled space', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const f = openFile(disk, '/d/a');
    call(disk, (d) => f.allocate(1 << 20, d));
    call(disk, (d) => f.write(10, bytes(5), d));
    const got = disk.read('/d/a');
    expect(got.length).toBe(1 << 20);
    expect(got[10]).toBe(5);
    expect(got.reduce((a, b) => a + b, 0)).toBe(5);
  });

  it('reports a failed writeback once to every handle open at the time (errseq)', () => {
    const disk = new MemDisk();
    disk.mkdirp('/d');
    const a = openFile(disk, '/d/f');
    let b: DiskFile | undefined;
    disk.open('/d/f', 'existing', (_e, f) => (b = f));
    disk.runPending();
    call(disk, (d) => a.write(0, bytes(1), d));
    disk.failNext('sync');
    expect(call(disk, (d) => a.sync(d))?.message).toMatch(/EIO/);
    // The other handle learns of it on its next sync, once.
    expect(call(disk, (d) => b!.sync(d))?.message).toMatch(/EIO/);
    expect(call(disk, (d) => b!.sync(d))).toBeNull();
    expect(call(disk, (d) => a.sync(d))).toBeNull();
  });
});
