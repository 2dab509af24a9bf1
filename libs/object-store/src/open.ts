/**
 * Object stores from URLs: `s3://bucket/prefix` and `file:///abs/folder`
 * (a bare path is taken as a folder), and a location split into the store
 * that holds it and its key.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileObjectStore } from './file-store.js';
import { BadLocationError, type ObjectStore } from './object-store.js';
import { S3ObjectStore, type S3StoreOptions } from './s3-store.js';

/** How to reach an S3-compatible service: everything but the bucket and prefix, which the URL gives. */
export type S3Connection = Omit<S3StoreOptions, 'bucket' | 'prefix'>;

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The store a URL names. Throws BadLocationError with what to write instead. */
export function openObjectStore(url: string, s3: S3Connection = {}): ObjectStore {
  if (url.startsWith('s3://')) {
    const rest = url.slice('s3://'.length);
    const cut = rest.indexOf('/');
    const bucket = cut < 0 ? rest : rest.slice(0, cut);
    if (!BUCKET.test(bucket)) throw new BadLocationError(`"${url}": "${bucket}" is not an S3 bucket name (3..63 of a-z, 0-9, ".", "-")`);
    return new S3ObjectStore({ ...s3, bucket, prefix: cut < 0 ? '' : rest.slice(cut + 1) });
  }
  if (url.startsWith('file://')) {
    let folder: string;
    try {
      folder = fileURLToPath(url);
    } catch (err) {
      throw new BadLocationError(`"${url}" is not a file URL: ${(err as Error).message}; write file:///absolute/folder`);
    }
    return new FileObjectStore(folder);
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) throw new BadLocationError(`"${url}": only s3:// and file:// locations are supported`);
  if (url === '') throw new BadLocationError('an empty location: write s3://bucket/prefix or file:///folder');
  return new FileObjectStore(path.resolve(url));
}

/** A location split at its last '/': the store of the folder (or prefix) that holds it, and the object's name there. */
export function openLocation(location: string, s3: S3Connection = {}): { store: ObjectStore; key: string } {
  const trimmed = location.replace(/\/+$/, '');
  const cut = trimmed.lastIndexOf('/');
  const scheme = /^[a-z0-9]+:\/\//i.exec(trimmed)?.[0] ?? '';
  if (cut < scheme.length)
    throw new BadLocationError(`"${location}" names no object: write s3://bucket/prefix/object or file:///folder/object`);
  return { store: openObjectStore(trimmed.slice(0, cut) || '/', s3), key: trimmed.slice(cut + 1) };
}
