/**
 * `NodeDisk`: the `Disk` seam over node:fs, for the cell node and the
 * benchmarks. Kept out of the main entry (import it from `@fencer/wal/node`)
 * so the replica and the simulator, which import `@fencer/wal`, stay free of
 * `node:` modules.
 *
 * Writes are positional (pwrite) and syncs are fdatasync, which is what
 * fault injection with `fiu-run` reaches (set UV_USE_IO_URING=0 so libuv
 * goes through the thread pool and the libc calls fiu intercepts).
 */
import fs from 'node:fs';
import { assert, assertUint } from '@fencer/base';
import type { Disk, DiskFile, Done } from './disk.js';

/** Zero-fill chunk for preallocation: big enough to be fast, small enough not to hog memory. */
const allocateChunkBytes = 1024 * 1024;
const zeros = new Uint8Array(allocateChunkBytes);

/**
 * Writes up to this size go straight into the page cache with pwrite on the
 * calling thread; `done` still runs later (a microtask), never inside the
 * call. A group-commit batch is usually a few KiB: copying it is cheap,
 * while the thread pool's round trip (wake a worker, wake the loop back)
 * costs two context switches before the fdatasync can even start. Bigger
 * writes (preallocation, snapshots) stay on the thread pool.
 */
const inlineWriteBytesMax = 64 * 1024;

/**
 * Where one fdatasync runs: 'pool' on libuv's thread pool; 'loop' on the
 * calling thread in a microtask (after what the caller queues in the same
 * run, before any I/O callback); 'loop-after-io' on the calling thread in a
 * `setImmediate`, once the loop has polled for I/O.
 */
export type SyncPlace = 'pool' | 'loop' | 'loop-after-io';

export interface NodeDiskOptions {
  /**
   * Asked before each fdatasync that would start while no other sync of the
   * same file is out, with the milliseconds since that file's last sync
   * ended and how long that sync took (0 before the first). Not asked (the
   * pool) while another sync of the file is out.
   *
   * The pool's round trip costs two wake-ups (the loop wakes a worker, the
   * worker wakes the loop), each comparable to a small fdatasync on a fast
   * disk: a replica that is idle between small writes answers sooner
   * syncing on its own thread. Under steady load the pool wins, because the
   * loop keeps reading sockets and can start the next write while a sync
   * runs. Default: always the pool. docs/benchmarks.md has the figures.
   */
  syncOnLoop?: (idleMs: number, lastSyncMs: number) => SyncPlace;
}

/** Syncs run so far, by where they ran (see `NodeDiskOptions.syncOnLoop`). */
export interface NodeDiskStats {
  syncsOnLoop: number;
  syncsInPool: number;
}

class NodeFile implements DiskFile {
  private closed = false;
  /** Syncs of this file started and not yet completed. */
  private syncsOut = 0;
  private lastSyncEndMs = 0;
  private lastSyncMs = 0;

  constructor(
    readonly path: string,
    private readonly fd: number,
    private readonly syncOnLoop: ((idleMs: number, lastSyncMs: number) => SyncPlace) | undefined,
    private readonly stats: NodeDiskStats,
  ) {}

  write(position: number, data: Uint8Array, done: Done): void {
    assert(!this.closed, `write after close: ${this.path}`);
    assertUint(position, 'position');
    if (data.length <= inlineWriteBytesMax) {
      let error: Error | null = null;
      try {
        for (let written = 0; written < data.length;) {
          const n = fs.writeSync(this.fd, data, written, data.length - written, position + written);
          assert(n > 0, 'pwrite made progress');
          written += n;
        }
      } catch (err) {
        error = err as Error;
      }
      queueMicrotask(() => done(error));
      return;
    }
    const step = (written: number): void => {
      if (written === data.length) return done(null);
      fs.write(this.fd, data, written, data.length - written, position + written, (err, n) => {
        if (err !== null) return done(err);
        // pwrite may write less than asked (a signal, a full disk): continue where it stopped.
        assert(n > 0, 'pwrite made progress');
        step(written + n);
      });
    };
    step(0);
  }

  allocate(bytes: number, done: Done): void {
    assert(!this.closed, `allocate after close: ${this.path}`);
    fs.fstat(this.fd, (err, stat) => {
      if (err !== null) return done(err);
      // Write real zeros (not ftruncate's holes) so later writes allocate no blocks and fdatasync flushes no metadata.
      const fill = (at: number): void => {
        if (at >= bytes) return done(null);
        const n = Math.min(allocateChunkBytes, bytes - at);
        this.write(at, n === allocateChunkBytes ? zeros : zeros.subarray(0, n), (e) => (e === null ? fill(at + n) : done(e)));
      };
      fill(stat.size);
    });
  }

  sync(done: Done): void {
    assert(!this.closed, `sync after close: ${this.path}`);
    this.syncsOut++;
    const now = performance.now();
    const place =
      this.syncsOut === 1 && this.syncOnLoop !== undefined ? this.syncOnLoop(now - this.lastSyncEndMs, this.lastSyncMs) : 'pool';
    if (place !== 'pool') {
      this.stats.syncsOnLoop++;
      // Never inside the call: the caller finishes what it was doing (queuing messages that
      // leave before this sync, for one), and done never runs inside sync().
      const run = (): void => {
        const started = performance.now();
        let error: Error | null = null;
        try {
          fs.fdatasyncSync(this.fd);
        } catch (err) {
          error = err as Error;
        }
        this.synced(started);
        done(error);
      };
      if (place === 'loop') queueMicrotask(run);
      else setImmediate(run);
      return;
    }
    this.stats.syncsInPool++;
    fs.fdatasync(this.fd, (err) => {
      this.synced(now);
      done(err);
    });
  }

  private synced(startedMs: number): void {
    this.syncsOut--;
    this.lastSyncEndMs = performance.now();
    this.lastSyncMs = this.lastSyncEndMs - startedMs;
  }

  close(done: Done): void {
    assert(!this.closed, `double close: ${this.path}`);
    this.closed = true;
    fs.close(this.fd, (err) => done(err));
  }
}

export class NodeDisk implements Disk {
  readonly stats: NodeDiskStats = { syncsOnLoop: 0, syncsInPool: 0 };

  constructor(private readonly options: NodeDiskOptions = {}) {}

  mkdirp(dir: string): void {
    fs.mkdirSync(dir, { recursive: true });
  }

  list(dir: string): string[] {
    try {
      return fs.readdirSync(dir).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  read(path: string): Uint8Array {
    const b = fs.readFileSync(path);
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  }

  open(path: string, mode: 'create' | 'existing', done: (err: Error | null, file?: DiskFile) => void): void {
    fs.open(path, mode === 'create' ? 'w' : 'r+', 0o644, (err, fd) =>
      err !== null ? done(err) : done(null, new NodeFile(path, fd, this.options.syncOnLoop, this.stats)),
    );
  }

  rename(from: string, to: string, done: Done): void {
    fs.rename(from, to, (err) => done(err));
  }

  unlink(path: string, done: Done): void {
    fs.unlink(path, (err) => done(err));
  }

  syncDir(dir: string, done: Done): void {
    fs.open(dir, 'r', (err, fd) => {
      if (err !== null) return done(err);
      fs.fsync(fd, (syncErr) => fs.close(fd, (closeErr) => done(syncErr ?? closeErr)));
    });
  }
}
