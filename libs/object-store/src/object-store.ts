/**
 * One small interface over object storage: what the control plane needs to
 * publish cell snapshots and the CLI needs to restore them
 * (docs/decisions/0014-snapshots-in-object-storage.md). Two implementations:
 * S3 and any S3-compatible endpoint (s3-store.ts), and a local folder with
 * `file://` locations (file-store.ts).
 *
 * Keys are relative to the store's root (a bucket and prefix, or a folder),
 * '/'-separated. Both implementations promise the same thing of `put`: a
 * reader sees the whole object or nothing under its key, never a part, so
 * an interrupted upload leaves at most an unlisted leftover. Bodies travel
 * as streams, so memory stays bounded whatever an object's size.
 */
import type { Readable } from 'node:stream';

export interface StoredObject {
  readonly key: string;
  readonly bytes: number;
}

export interface ObjectStore {
  /** The store's root, as a URL: `s3://bucket/prefix` or `file:///abs/folder`. */
  readonly url: string;
  /** Where `key` is, as a URL a person or `fencer cell restore --from` can use. */
  locationOf(key: string): string;
  /** Stores `body` under `key`, replacing what was there; readers see all of it or none of it. */
  put(key: string, body: Readable | Uint8Array, signal?: AbortSignal): Promise<void>;
  /** The object's bytes as a stream; rejects with ObjectNotFoundError when there is none. */
  get(key: string, signal?: AbortSignal): Promise<Readable>;
  /** Objects whose key starts with `prefix`, sorted by key. */
  list(prefix: string, signal?: AbortSignal): Promise<StoredObject[]>;
  /** Removes the object; a missing one is already removed. */
  delete(key: string, signal?: AbortSignal): Promise<void>;
  close(): void;
}

export class ObjectNotFoundError extends Error {
  override readonly name = 'ObjectNotFoundError';
  constructor(readonly location: string) {
    super(`no object at ${location}`);
  }
}

/** A key or location the store refuses, with what to change. */
export class BadLocationError extends Error {
  override readonly name = 'BadLocationError';
}

/** Characters a key may use: what cell ids, numbers and the layout's separators need, nothing a shell or URL must escape. */
const KEY_PATTERN = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;
export const KEY_CHARS_MAX = 512;

/** Throws BadLocationError unless `key` is a relative '/'-separated path without empty, '.' or '..' parts. */
export function checkKey(key: string): void {
  if (key.length === 0 || key.length > KEY_CHARS_MAX || !KEY_PATTERN.test(key))
    throw new BadLocationError(`object key "${key}" must be 1..${KEY_CHARS_MAX} characters of [A-Za-z0-9._-] in '/'-separated parts`);
  if (key.split('/').some((part) => part === '.' || part === '..'))
    throw new BadLocationError(`object key "${key}" has a "." or ".." part`);
}

/** A prefix for `list`: empty, or a key, optionally ending in '/'. */
export function checkPrefix(prefix: string): void {
  if (prefix === '') return;
  checkKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
}
