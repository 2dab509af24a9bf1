/**
 * Goal: MemDisk loses exactly what a power cut may lose (torn at a byte, or
 * sector by sector in any order), and lyingDisk makes nothing durable while
 * completing like an honest disk, so tests built on them mean something.
 * Method: write, sync or not, crash, and read back; one case per fault the
 * simulator and the property tests rely on.
 */
import { SeededRandom } from '@fencer/base';
import { describe, expect, it } from 'vitest';
import { type DiskFile } from '../src/index.js';
import { MemDisk, lyingDisk } from '../src/testing.js';

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

/** A fresh disk with an empty file /d/a whose name is durable. */
function namedFile(): { disk: MemDisk; f: DiskFile } {
  const disk = new MemDisk();
  disk.mkdirp('/d');
  const f = openFile(disk, '/d/a');
  call(disk, (d) => disk.syncDir('/d', d));
  return { disk, f };
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
      const { disk, f } = namedFile();
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

  it('tears by sectors with tearUnitBytes: each aligned sector of the lost write lands whole or not, in any order', () => {
    const patterns = new Set<string>();
    for (let seed = 1; seed <= 60; seed++) {
      const { disk, f } = namedFile();
      call(disk, (d) => f.allocate(2048, d));
      call(disk, (d) => f.sync(d));
      // Starts mid-sector: the first piece is the rest of sector 0, then sectors 1 and 2 whole, then part of 3.
      f.write(300, new Uint8Array(1500).fill(7), () => {});
      disk.runPending();
      disk.crash({ mode: 'random', random: new SeededRandom(seed), tearUnitBytes: 512, tearChance: 1 });
      const got = disk.read('/d/a');
      expect(got.length).toBe(2048);
      const pieces = [
        [300, 512],
        [512, 1024],
        [1024, 1536],
        [1536, 1800],
      ];
      const landed = pieces.map(([from, to]) => {
        const piece = got.subarray(from, to);
        // Each piece is all written or all as before: never cut inside a sector.
        expect(piece.every((b) => b === 7) || piece.every((b) => b === 0)).toBe(true);
        return piece[0] === 7 ? '1' : '0';
      });
      expect(got.subarray(0, 300).every((b) => b === 0) && got.subarray(1800).every((b) => b === 0)).toBe(true);
      patterns.add(landed.join(''));
    }
    // Later sectors land without earlier ones.
    expect([...patterns].some((p) => /0.*1/.test(p))).toBe(true);
    expect(patterns.size).toBeGreaterThan(6);
  });

  it('lyingDisk: a lying sync or syncDir completes like an honest one and makes nothing durable', () => {
    for (const lie of ['sync', 'syncDir'] as const) {
      const disk = new MemDisk();
      disk.mkdirp('/d');
      const liar = lyingDisk(disk, lie);
      let file: DiskFile | undefined;
      liar.open('/d/a', 'create', (_e, f) => (file = f));
      disk.runPending();
      let synced = false;
      call(disk, (d) => file!.write(0, bytes(1, 2), d));
      file!.sync((err) => (synced = err === null));
      expect(synced).toBe(false); // never inside the call
      disk.runPending();
      expect(synced).toBe(true);
      call(disk, (d) => liar.syncDir('/d', d));
      disk.crash();
      if (lie === 'sync') expect(disk.read('/d/a')).toEqual(new Uint8Array(0));
      else expect(disk.exists('/d/a')).toBe(false);
    }
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
