/**
 * @fencer/object-store: object storage for cell snapshots
 * (docs/decisions/0014-snapshots-in-object-storage.md). The interface and
 * its two implementations (S3 and S3-compatible endpoints; a local folder
 * with file:// locations), stores from URLs, the snapshot layout with its
 * manifest written last, and the retention rule.
 */
export { BadLocationError, KEY_CHARS_MAX, ObjectNotFoundError, checkKey, type ObjectStore, type StoredObject } from './object-store.js';
export { FileObjectStore } from './file-store.js';
export { S3ObjectStore, type S3StoreOptions } from './s3-store.js';
export { openLocation, openObjectStore, type S3Connection } from './open.js';
export {
  DigestStream,
  MANIFEST_FORMAT_VERSION,
  MANIFEST_SUFFIX,
  SNAPSHOT_SUFFIX,
  SnapshotIntegrityError,
  checkManifest,
  deleteSnapshot,
  digestOf,
  fetchSnapshot,
  listSnapshots,
  manifestKeyOf,
  publishSnapshot,
  readManifest,
  snapshotKey,
  type PublishedSnapshot,
  type SnapshotInfo,
  type SnapshotManifest,
} from './snapshot-archive.js';
export { snapshotsToDelete, type RetainedRecord, type RetentionPolicy } from './retention.js';
export { manifestBytesMax, s3Defaults, snapshotBytesMax } from './limits.js';
