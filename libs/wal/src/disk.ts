/**
 * The storage seam under the WAL. Everything that changes durable state is
 * callback-completed, so the simulator's in-memory disk (`MemDisk`) can
 * complete it from its own scheduler in virtual time, and the real one
 * (`NodeDisk`, in the `@fencer/wal/node` entry) from libuv. Reads and
 * listings are synchronous: they happen only while opening a store.
 *
 * Durability model (POSIX, and what MemDisk simulates):
 * - a write is visible to reads at once but durable only after `sync` of
 *   that file returns without error;
 * - a create, rename or unlink is durable only after `syncDir` of the
 *   directory that holds the name;
 * - a failed `sync` may have dropped the unsynced writes for good (Linux
 *   marks the pages clean: "fsyncgate"), so callers must never retry it.
 *
 * Paths are plain strings joined with '/', so this module needs no `node:path`.
 */

export type Done = (err: Error | null) => void;

export interface DiskFile {
  readonly path: string;
  /** Positional write (pwrite) of all of `data` at `position`. */
  write(position: number, data: Uint8Array, done: Done): void;
  /**
   * Grows the file to at least `bytes`, zero-filled, with its blocks
   * written, so later writes inside it change no file size and a sync need
   * not flush metadata. Durable after `sync`.
   */
  allocate(bytes: number, done: Done): void;
  /** fdatasync: the file's written bytes are durable when done(null). */
  sync(done: Done): void;
  close(done: Done): void;
}

export interface Disk {
  /** Creates the directory and its parents if missing (open time only). */
  mkdirp(dir: string): void;
  /** Sorted entry names of a directory; [] when it does not exist (open time only). */
  list(dir: string): string[];
  /** A whole file's current content (open time only). Throws when missing. */
  read(path: string): Uint8Array;
  /**
   * Opens a file for positional writes. 'create' creates it (truncating an
   * existing one); 'existing' fails when it is missing.
   */
  open(path: string, mode: 'create' | 'existing', done: (err: Error | null, file?: DiskFile) => void): void;
  /** Atomic rename within one directory. Durable after `syncDir`. */
  rename(from: string, to: string, done: Done): void;
  /** Removes a name. Durable after `syncDir`. */
  unlink(path: string, done: Done): void;
  /** fsync of a directory: its creates, renames and unlinks are durable when done(null). */
  syncDir(dir: string, done: Done): void;
}

export function joinPath(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

export function dirName(path: string): string {
  const at = path.lastIndexOf('/');
  if (at < 0) return '.';
  if (at === 0) return '/';
  return path.slice(0, at);
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
