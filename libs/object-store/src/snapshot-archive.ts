/**
 * Cell snapshots in an object store
 * (docs/decisions/0014-snapshots-in-object-storage.md).
 *
 * Layout, under the store's root:
 *   <cell>/<index>-<term>.snap   the replica's snapshot file, byte for byte
 *                                (libs/wal's format: header, lock state, crc32c)
 *   <cell>/<index>-<term>.json   its manifest (SnapshotManifest)
 *
 * The manifest is written last, and only after the stored object was read
 * back and matched the sha256 and length of what was sent: a snapshot is
 * listed (has a manifest) only when it is whole. An upload that fails at
 * any point leaves no manifest, and its object is deleted when possible.
 */
import { createHash } from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { manifestBytesMax } from './limits.js';
import { ObjectNotFoundError, type ObjectStore } from './object-store.js';

export const MANIFEST_FORMAT_VERSION = 1;
export const SNAPSHOT_SUFFIX = '.snap';
export const MANIFEST_SUFFIX = '.json';

/** What the replica said of the snapshot it streamed (admin ReadSnapshot's first chunk). */
export interface SnapshotInfo {
  readonly cell: string;
  /** The Raft index the snapshot covers. */
  readonly index: number;
  readonly term: number;
  readonly voters: readonly string[];
  readonly learners: readonly string[];
  /** The lock state's revision base, and the revision of its last entry (index + base). */
  readonly revisionBase: number;
  readonly lastRevision: number;
  /** The snapshot file's length. */
  readonly bytes: number;
}

export interface SnapshotManifest {
  readonly formatVersion: number;
  readonly cell: string;
  readonly index: number;
  readonly term: number;
  readonly membership: { readonly voters: readonly string[]; readonly learners: readonly string[] };
  readonly revisionBase: number;
  readonly lastRevision: number;
  readonly bytes: number;
  /** Lowercase hex SHA-256 of the stored object. */
  readonly sha256: string;
  /** When the snapshot was asked for (ISO 8601): a restore raises the revision base by the time since. */
  readonly createdAt: string;
  /** The object's key, beside the manifest. */
  readonly object: string;
}

/** The stored bytes are not the snapshot's: a partial or damaged object, or a manifest that does not read. */
export class SnapshotIntegrityError extends Error {
  override readonly name = 'SnapshotIntegrityError';
}

export const snapshotKey = (cell: string, index: number, term: number): string => `${cell}/${index}-${term}${SNAPSHOT_SUFFIX}`;
export const manifestKeyOf = (objectKey: string): string =>
  `${objectKey.endsWith(SNAPSHOT_SUFFIX) ? objectKey.slice(0, -SNAPSHOT_SUFFIX.length) : objectKey}${MANIFEST_SUFFIX}`;

/** Passes bytes through, counting them and hashing them with SHA-256. */
export class DigestStream extends Transform {
  private readonly hash = createHash('sha256');
  bytes = 0;
  private digest: string | undefined;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    this.digest = this.hash.digest('hex');
    done();
  }

  /** The hex digest, once the stream has ended. */
  get sha256(): string {
    if (this.digest === undefined) throw new Error('the digest is known once the stream has ended');
    return this.digest;
  }
}

/** Length and SHA-256 of a stream, read to its end (the stream's memory only: nothing is kept). */
export async function digestOf(body: Readable): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

export interface PublishedSnapshot {
  readonly manifest: SnapshotManifest;
  /** The object's location (what the catalogue records and a restore reads). */
  readonly location: string;
}

/** `body` with `source`'s errors passed on, so a broken stream from the replica fails the upload. */
function hashed(body: Readable): DigestStream {
  const digest = new DigestStream();
  body.on('error', (err) => digest.destroy(err));
  return body.pipe(digest);
}

async function uploadVerified(store: ObjectStore, key: string, info: SnapshotInfo, body: Readable, signal?: AbortSignal): Promise<string> {
  const digest = hashed(body);
  await store.put(key, digest, signal);
  if (digest.bytes !== info.bytes)
    throw new SnapshotIntegrityError(`the replica sent ${digest.bytes} bytes of a snapshot of ${info.bytes} bytes`);
  const stored = await digestOf(await store.get(key, signal));
  if (stored.bytes !== digest.bytes || stored.sha256 !== digest.sha256) {
    throw new SnapshotIntegrityError(
      `${store.locationOf(key)} holds ${stored.bytes} bytes (sha256 ${stored.sha256}) after an upload of ${digest.bytes} bytes (sha256 ${digest.sha256})`,
    );
  }
  return digest.sha256;
}

/**
 * Streams `body` (the snapshot file `info` describes) to its key, reads it
 * back to check its length and SHA-256, then writes its manifest. On any
 * failure no manifest stays behind, and the object is deleted when it can
 * be (a failed delete leaves an unlisted object, never a listed partial one).
 */
export async function publishSnapshot(
  store: ObjectStore,
  info: SnapshotInfo,
  body: Readable,
  createdAtMs: number,
  signal?: AbortSignal,
): Promise<PublishedSnapshot> {
  const key = snapshotKey(info.cell, info.index, info.term);
  const manifestKey = manifestKeyOf(key);
  let manifestSent = false;
  try {
    const sha256 = await uploadVerified(store, key, info, body, signal);
    const manifest: SnapshotManifest = {
      formatVersion: MANIFEST_FORMAT_VERSION,
      cell: info.cell,
      index: info.index,
      term: info.term,
      membership: { voters: [...info.voters], learners: [...info.learners] },
      revisionBase: info.revisionBase,
      lastRevision: info.lastRevision,
      bytes: info.bytes,
      sha256,
      createdAt: new Date(createdAtMs).toISOString(),
      object: key.slice(key.lastIndexOf('/') + 1),
    };
    manifestSent = true;
    await store.put(manifestKey, Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`), signal);
    return { manifest, location: store.locationOf(key) };
  } catch (err) {
    body.destroy();
    await withdraw(store, key, manifestSent);
    throw err;
  }
}

/** After a failed publish: the manifest (which a lost answer may have written) goes first; the object only once it has. */
async function withdraw(store: ObjectStore, key: string, manifestSent: boolean): Promise<void> {
  try {
    if (manifestSent) await store.delete(manifestKeyOf(key));
    await store.delete(key);
  } catch {
    // Left for retention: an object without a manifest is never listed, and never restored from.
  }
}

/** Deletes a published snapshot: its manifest first (it stops being listed), then its object. */
export async function deleteSnapshot(store: ObjectStore, objectKey: string, signal?: AbortSignal): Promise<void> {
  await store.delete(manifestKeyOf(objectKey), signal);
  await store.delete(objectKey, signal);
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isIdList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string' && x.length > 0);

/** Checks a parsed manifest field by field; throws SnapshotIntegrityError naming the first bad one. */
export function checkManifest(value: unknown, where: string): SnapshotManifest {
  const m = value as Partial<SnapshotManifest> | null;
  const bad = (what: string): never => {
    throw new SnapshotIntegrityError(`${where} is not a snapshot manifest: ${what}`);
  };
  if (typeof m !== 'object' || m === null) return bad('not a JSON object');
  if (m.formatVersion !== MANIFEST_FORMAT_VERSION)
    bad(`format version ${String(m.formatVersion)}, this build reads ${MANIFEST_FORMAT_VERSION}`);
  if (typeof m.cell !== 'string' || m.cell === '') bad('no cell');
  for (const k of ['index', 'term', 'revisionBase', 'lastRevision', 'bytes'] as const)
    if (!isCount(m[k])) bad(`${k} is not an integer >= 0`);
  if (!isIdList(m.membership?.voters) || m.membership.voters.length === 0 || !isIdList(m.membership.learners)) bad('bad membership');
  if (typeof m.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(m.sha256)) bad('sha256 is not 64 lowercase hex digits');
  if (typeof m.createdAt !== 'string' || Number.isNaN(Date.parse(m.createdAt))) bad('createdAt is not a date');
  if (typeof m.object !== 'string' || !m.object.endsWith(SNAPSHOT_SUFFIX)) bad(`object is not a ${SNAPSHOT_SUFFIX} name`);
  return m as SnapshotManifest;
}

async function readAll(body: Readable, bytesMax: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > bytesMax) {
      body.destroy();
      throw new SnapshotIntegrityError(`${what} is longer than ${bytesMax} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, bytes);
}

/** The manifest at `key`, checked. */
export async function readManifest(store: ObjectStore, key: string, signal?: AbortSignal): Promise<SnapshotManifest> {
  const where = store.locationOf(key);
  const text = (await readAll(await store.get(key, signal), manifestBytesMax, where)).toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new SnapshotIntegrityError(`${where} is not JSON: ${(err as Error).message}`);
  }
  return checkManifest(parsed, where);
}

/** The cell's published snapshots (those with a manifest), the highest index first. */
export async function listSnapshots(store: ObjectStore, cell: string, signal?: AbortSignal): Promise<SnapshotManifest[]> {
  const keys = (await store.list(`${cell}/`, signal)).map((o) => o.key).filter((k) => k.endsWith(MANIFEST_SUFFIX));
  const manifests: SnapshotManifest[] = [];
  for (const key of keys) {
    try {
      manifests.push(await readManifest(store, key, signal));
    } catch (err) {
      // Deleted between the listing and the read: no longer published.
      if (!(err instanceof ObjectNotFoundError)) throw err;
    }
  }
  return manifests.sort((a, b) => b.index - a.index || b.term - a.term);
}

/**
 * The snapshot file a manifest describes, read whole (a restore decodes it
 * whole, as a replica would) and checked against the manifest's length and
 * SHA-256 before anything uses it.
 */
export async function fetchSnapshot(
  store: ObjectStore,
  manifestKey: string,
  manifest: SnapshotManifest,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const folder = manifestKey.includes('/') ? manifestKey.slice(0, manifestKey.lastIndexOf('/') + 1) : '';
  const key = `${folder}${manifest.object}`;
  const where = store.locationOf(key);
  const bytes = await readAll(await store.get(key, signal), manifest.bytes, `${where} (its manifest says ${manifest.bytes} bytes)`);
  if (bytes.length !== manifest.bytes)
    throw new SnapshotIntegrityError(`${where} holds ${bytes.length} bytes; its manifest says ${manifest.bytes}: the object is damaged`);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== manifest.sha256)
    throw new SnapshotIntegrityError(`${where} has sha256 ${sha256}; its manifest says ${manifest.sha256}: the object is damaged`);
  return bytes;
}
