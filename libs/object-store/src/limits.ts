/**
 * Every limit and default of the object store and the snapshot archive, in
 * one place (CONTRIBUTING.md, "Limits"), each with its reason.
 */

const MiB = 1024 * 1024;

export const s3Defaults = {
  /** S3's own default region; an S3-compatible server mostly ignores it. */
  region: 'us-east-1',
  /** A multipart part: S3's minimum is 5 MiB; 8 MiB keeps a 10,000-part upload under 78 GiB. */
  partBytes: 8 * MiB,
  /** Parts in flight: an upload buffers at most partBytes × queueSize (16 MiB), whatever the snapshot's size. */
  queueSize: 2,
  /** Attempts per request (the SDK's retry with backoff): rides out a few failed requests in a row. */
  maxAttempts: 8,
  /** One request, a part's upload included: a part of 8 MiB at 1 MB/s still fits. */
  requestTimeoutMs: 30_000,
} as const;

/** A manifest is a few hundred bytes of JSON; anything larger is not one of ours. */
export const manifestBytesMax = 64 * 1024;

/** Largest snapshot a restore reads into memory: the replica builds it whole in memory too. */
export const snapshotBytesMax = 4 * 1024 * MiB;
