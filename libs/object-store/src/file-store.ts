/**
 * A local folder as an object store, with `file://` locations: the default
 * of the local fleet, and what a single machine or a shared mount uses.
 *
 * `put` writes a temporary file beside the key's (`.<name>.tmp-…`), fsyncs
 * it, renames it over the key and fsyncs the folder: a reader sees the whole
 * object or none, and a crash leaves only a temporary name, which `list`
 * never shows and the next `put` of that key does not mind.
 */
import { mkdir, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { checkKey, checkPrefix, ObjectNotFoundError, type ObjectStore, type StoredObject } from './object-store.js';

const TEMPORARY = /^\..*\.tmp-\d+-\d+$/;

let temporaries = 0;

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === 'ENOENT';
}

async function syncFolder(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export class FileObjectStore implements ObjectStore {
  readonly url: string;

  /** `root`: the folder objects live under (made on the first put). */
  constructor(readonly root: string) {
    this.root = path.resolve(root);
    this.url = pathToFileURL(this.root).href;
  }

  private pathOf(key: string): string {
    checkKey(key);
    return path.join(this.root, ...key.split('/'));
  }

  locationOf(key: string): string {
    return pathToFileURL(this.pathOf(key)).href;
  }

  async put(key: string, body: Readable | Uint8Array, signal?: AbortSignal): Promise<void> {
    const file = this.pathOf(key);
    const dir = path.dirname(file);
    await mkdir(dir, { recursive: true });
    const temporary = path.join(dir, `.${path.basename(file)}.tmp-${process.pid}-${++temporaries}`);
    const handle = await open(temporary, 'w', 0o644);
    try {
      const chunks = body instanceof Uint8Array ? [body] : body;
      for await (const chunk of chunks as AsyncIterable<Uint8Array>) {
        signal?.throwIfAborted();
        await handle.write(chunk);
      }
      await handle.sync();
      await handle.close();
      await rename(temporary, file);
      await syncFolder(dir);
    } catch (err) {
      await handle.close().catch(() => undefined);
      await rm(temporary, { force: true });
      throw err;
    }
  }

  async get(key: string, signal?: AbortSignal): Promise<Readable> {
    const file = this.pathOf(key);
    try {
      // Opened before returning, so a missing object rejects here rather than as a stream error.
      const handle = await open(file, 'r');
      return handle.createReadStream({ autoClose: true, ...(signal ? { signal } : {}) });
    } catch (err) {
      if (isMissing(err)) throw new ObjectNotFoundError(this.locationOf(key));
      throw err;
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    checkPrefix(prefix);
    // The deepest folder the prefix names fully; its files are then filtered by the whole prefix.
    const cut = prefix.lastIndexOf('/');
    const folderKey = cut < 0 ? '' : prefix.slice(0, cut);
    const found: StoredObject[] = [];
    await this.walk(folderKey, found);
    return found.filter((o) => o.key.startsWith(prefix)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  private async walk(folderKey: string, found: StoredObject[]): Promise<void> {
    const dir = folderKey === '' ? this.root : path.join(this.root, ...folderKey.split('/'));
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const e of entries) {
      const key = folderKey === '' ? e.name : `${folderKey}/${e.name}`;
      if (e.isDirectory()) await this.walk(key, found);
      else if (e.isFile() && !TEMPORARY.test(e.name)) found.push({ key, bytes: (await stat(path.join(dir, e.name))).size });
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.pathOf(key);
    try {
      await unlink(file);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    await syncFolder(path.dirname(file));
  }

  close(): void {}
}
