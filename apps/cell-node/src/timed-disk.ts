/**
 * A Disk decorator that times every fdatasync and directory fsync for the
 * `fencer_wal_fsync_seconds` histogram. It changes nothing else: errors pass
 * through untouched (the WAL crashes on them; nothing here retries).
 */
import type { Disk, DiskFile } from '@fencer/wal';

export function timedDisk(inner: Disk, observeSeconds: (kind: 'file' | 'dir', seconds: number) => void, nowMs: () => number): Disk {
  const timeFile = (file: DiskFile): DiskFile => ({
    path: file.path,
    write: (position, data, done) => file.write(position, data, done),
    allocate: (bytes, done) => file.allocate(bytes, done),
    sync: (done) => {
      const started = nowMs();
      file.sync((err) => {
        if (!err) observeSeconds('file', (nowMs() - started) / 1000);
        done(err);
      });
    },
    close: (done) => file.close(done),
  });
  return {
    mkdirp: (dir) => inner.mkdirp(dir),
    list: (dir) => inner.list(dir),
    read: (path) => inner.read(path),
    open: (path, mode, done) => inner.open(path, mode, (err, file) => done(err, file ? timeFile(file) : undefined)),
    rename: (from, to, done) => inner.rename(from, to, done),
    unlink: (path, done) => inner.unlink(path, done),
    syncDir: (dir, done) => {
      const started = nowMs();
      inner.syncDir(dir, (err) => {
        if (!err) observeSeconds('dir', (nowMs() - started) / 1000);
        done(err);
      });
    },
  };
}
