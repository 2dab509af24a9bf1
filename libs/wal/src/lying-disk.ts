/**
 * A disk that lies about durability, for negative controls: a property that
 * judges what survives a crash must fail over it, or it judges nothing.
 *
 * - 'sync': fdatasync reports success without making the file's writes
 *   durable (a volatile write cache that ignores flushes);
 * - 'syncDir': a directory fsync reports success without making its
 *   creates, renames and unlinks durable.
 *
 * Completions still come from the wrapped MemDisk's queue, so the store
 * under test sees the same asynchrony as over an honest disk.
 */
import { type Disk, type DiskFile, type Done } from './disk.js';
import type { MemDisk } from './mem-disk.js';

export type DiskLie = 'sync' | 'syncDir';

/** A directory of the wrapped disk whose syncs complete a lying syncDir; nothing lives in it. */
const decoyDir = '/.lying-disk';

export function lyingDisk(inner: MemDisk, lie: DiskLie): Disk {
  inner.mkdirp(decoyDir);
  const wrap = (f: DiskFile): DiskFile => ({
    path: f.path,
    write: (position, data, done) => f.write(position, data, done),
    allocate: (bytes, done) => f.allocate(bytes, done),
    // Growing a file to no more than its size changes nothing, yet completes through the queue.
    sync: lie === 'sync' ? (done: Done) => f.allocate(0, done) : (done: Done) => f.sync(done),
    close: (done) => f.close(done),
  });
  return {
    mkdirp: (dir) => inner.mkdirp(dir),
    list: (dir) => inner.list(dir),
    read: (path) => inner.read(path),
    open: (path, mode, done) =>
      inner.open(path, mode, (err, file) => (err !== null || file === undefined ? done(err) : done(null, wrap(file)))),
    rename: (from, to, done) => inner.rename(from, to, done),
    unlink: (path, done) => inner.unlink(path, done),
    syncDir: lie === 'syncDir' ? (_dir, done) => inner.syncDir(decoyDir, done) : (dir, done) => inner.syncDir(dir, done),
  };
}
