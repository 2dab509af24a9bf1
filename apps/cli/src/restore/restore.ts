/**
 * `fencer cell restore`: fresh replica data folders for a cell rebuilt from
 * an object-store snapshot, after a disaster took a majority of its disks
 * (docs/decisions/0014-snapshots-in-object-storage.md).
 *
 * In order:
 * 1. find the manifest (the location given, or the cell's newest under a
 *    store root) and read the snapshot object whole, checking its length and
 *    SHA-256 against the manifest before anything uses it;
 * 2. decode the replica's snapshot file (libs/wal's format, its own crc32c)
 *    and check it is the snapshot the manifest names;
 * 3. rewrite the lock state (@fencer/lock-fsm rewriteSnapshotForRestore):
 *    the revision base raised above anything the lost cell could have
 *    issued since the snapshot (docs/decisions/0003-revisions-are-log-index-plus-base.md),
 *    and the member directory naming the new replicas;
 * 4. per replica, an empty folder gets a WAL store (@fencer/wal's store
 *    API, the very code a replica opens it with) holding that snapshot,
 *    with the new replicas as voters, and a hard state committing its
 *    index; then the folder is reopened to check it recovers to exactly that.
 *
 * The restored cell's replicas start with their usual flags; their stored
 * membership wins over --peers, which only tells where each one listens.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { readSnapshotHead, rewriteSnapshotForRestore } from '@fencer/lock-fsm';
import {
  fetchSnapshot,
  listSnapshots,
  manifestKeyOf,
  openLocation,
  openObjectStore,
  readManifest,
  MANIFEST_SUFFIX,
  SNAPSHOT_SUFFIX,
  type ObjectStore,
  type S3Connection,
  type SnapshotManifest,
} from '@fencer/object-store';
import type { Snapshot } from '@fencer/raft';
import { decodeSnapshotFile, openRaftLogStore, type WalStore } from '@fencer/wal';
import { NodeDisk } from '@fencer/wal/node';

/** The default raise assumes the lost cell wrote at most this many entries per second after the snapshot. */
export const ENTRIES_PER_SECOND_MAX = 100_000;
/** ...for the snapshot's age plus this long (the time between the loss and the restore is not known). */
export const RAISE_SLACK_MS = 3_600_000;
/** ...plus this many: room for the namespaces the lost cell imported meanwhile. */
export const RAISE_MARGIN = 1_000_000;

export interface RestoreReplica {
  readonly id: string;
  /** Its lock-service gRPC address (its --listen). */
  readonly address: string;
  /** Its Raft peer address (its --peer-listen). */
  readonly peerAddress: string;
}

export interface RestoreRequest {
  /** s3://… or file://…: a snapshot object or its manifest, or a store root (the cell's newest is taken). */
  readonly from: string;
  readonly cell: string;
  /** Each replica's folder is <dataDir>/<replica id>; each must be missing or empty. */
  readonly dataDir: string;
  readonly replicas: readonly RestoreReplica[];
  /** Overrides the default raise of the revision base. */
  readonly bumpRevision?: number;
  readonly s3: S3Connection;
  readonly nowMs: number;
}

export interface RestoreResult {
  readonly manifest: SnapshotManifest;
  readonly manifestLocation: string;
  readonly revisionBase: { readonly before: number; readonly after: number };
  readonly folders: readonly { readonly id: string; readonly dir: string }[];
}

/** A restore that cannot go on, with what to change. */
export class RestoreError extends Error {
  override readonly name = 'RestoreError';
}

/** (now − createdAt + 1 h) × 100,000 entries/s + 1,000,000: above what the lost cell could have issued since. */
export function defaultRevisionRaise(createdAtMs: number, nowMs: number): number {
  const seconds = Math.ceil((Math.max(0, nowMs - createdAtMs) + RAISE_SLACK_MS) / 1000);
  return seconds * ENTRIES_PER_SECOND_MAX + RAISE_MARGIN;
}

/** The store and manifest key `from` names. */
async function findManifest(from: string, cell: string, s3: S3Connection): Promise<{ store: ObjectStore; key: string }> {
  if (from.endsWith(SNAPSHOT_SUFFIX) || from.endsWith(MANIFEST_SUFFIX)) {
    const { store, key } = openLocation(from, s3);
    return { store, key: key.endsWith(SNAPSHOT_SUFFIX) ? manifestKeyOf(key) : key };
  }
  const store = openObjectStore(from, s3);
  const newest = (await listSnapshots(store, cell))[0];
  if (newest === undefined) {
    store.close();
    throw new RestoreError(`no snapshot of cell ${cell} under ${store.url} (no ${cell}/*${MANIFEST_SUFFIX})`);
  }
  return { store, key: manifestKeyOf(`${cell}/${newest.object}`) };
}

function checkFolders(dataDir: string, replicas: readonly RestoreReplica[]): { id: string; dir: string }[] {
  if (replicas.length === 0) throw new RestoreError('--replicas names no replica');
  return replicas.map((r) => {
    const dir = path.resolve(dataDir, r.id);
    if (existsSync(dir) && readdirSync(dir).length > 0)
      throw new RestoreError(`${dir} is not empty: a restore writes only fresh folders; move it away first`);
    return { id: r.id, dir };
  });
}

function decodeChecked(bytes: Uint8Array, manifest: SnapshotManifest, where: string): Snapshot {
  let snapshot: Snapshot;
  try {
    snapshot = decodeSnapshotFile(bytes);
  } catch (err) {
    throw new RestoreError(`${where} is not a replica snapshot file: ${(err as Error).message}`);
  }
  if (snapshot.meta.index !== manifest.index || snapshot.meta.term !== manifest.term)
    throw new RestoreError(
      `${where} covers ${snapshot.meta.index}@${snapshot.meta.term}; its manifest says ${manifest.index}@${manifest.term}`,
    );
  return snapshot;
}

/** The snapshot the new replicas start from: the raised lock state, the new voters. */
function restoredSnapshot(snapshot: Snapshot, request: RestoreRequest, raise: number): Snapshot {
  const members = new Map(request.replicas.map((r) => [r.id, { address: r.address, peerAddress: r.peerAddress }]));
  let data: Uint8Array;
  try {
    data = rewriteSnapshotForRestore(snapshot.data, { revisionRaise: raise, members });
  } catch (err) {
    throw new RestoreError(`cannot rewrite the lock state: ${(err as Error).message}`);
  }
  const voters = request.replicas.map((r) => NodeId(r.id));
  return { meta: { index: snapshot.meta.index, term: snapshot.meta.term, conf: { voters, learners: [] } }, data };
}

export async function restoreCell(request: RestoreRequest): Promise<RestoreResult> {
  const folders = checkFolders(request.dataDir, request.replicas);
  const { store, key } = await findManifest(request.from, request.cell, request.s3);
  try {
    const manifest = await readManifest(store, key);
    if (manifest.cell !== request.cell)
      throw new RestoreError(`${store.locationOf(key)} is a snapshot of cell ${manifest.cell}, not ${request.cell}`);
    const bytes = await fetchSnapshot(store, key, manifest);
    const snapshot = decodeChecked(bytes, manifest, store.locationOf(key));
    const before = readSnapshotHead(snapshot.data).revisionBase;
    const raise = request.bumpRevision ?? defaultRevisionRaise(Date.parse(manifest.createdAt), request.nowMs);
    const restored = restoredSnapshot(snapshot, request, raise);
    for (const f of folders) await writeFolder(f.dir, restored);
    return { manifest, manifestLocation: store.locationOf(key), revisionBase: { before, after: before + raise }, folders };
  } finally {
    store.close();
  }
}

function opened(dir: string): Promise<WalStore> {
  return new Promise((resolve, reject) =>
    openRaftLogStore(new NodeDisk(), dir, {}, (err, store) => (err || !store ? reject(err ?? new Error('no store')) : resolve(store))),
  );
}

const completed = (run: (done: (err: Error | null) => void) => void): Promise<void> =>
  new Promise((resolve, reject) => run((err) => (err ? reject(err) : resolve())));

/** One replica's folder: the snapshot and a hard state committing it, through the WAL's own API; then reopened and checked. */
async function writeFolder(dir: string, snapshot: Snapshot): Promise<void> {
  const store = await opened(dir);
  try {
    await completed((done) => store.saveSnapshot(snapshot, done));
    const hardState = { term: Term(snapshot.meta.term), vote: null, commit: LogIndex(snapshot.meta.index) };
    await completed((done) => store.save(hardState, [], done));
  } finally {
    await completed((done) => store.close(done));
  }
  const check = await opened(dir);
  try {
    const got = check.snapshot();
    const { hardState } = check.initialState();
    if (got.meta.index !== snapshot.meta.index || hardState.commit !== snapshot.meta.index || check.lastIndex() !== snapshot.meta.index)
      throw new RestoreError(`${dir} does not recover to the restored snapshot (snapshot ${got.meta.index}, commit ${hardState.commit})`);
  } finally {
    await completed((done) => check.close(done));
  }
}
