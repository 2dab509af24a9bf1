/**
 * Every limit and default of the object store and the snapshot archive, in
 * one place (CONTRIBUTING.md, "Limits"), each with its reason.
 */

const MiB = 1024 * 1024;

export const s3Defaults = {
  /** S3's own default region; an S3-compatible server mostly ignores it. */
  region: 'us-east-1',
  /**
   * A multipart part: S3's minimum, 5 MiB (a 10,000-part upload still holds 48 GiB). lib-storage copies
   * each part once more while it assembles it, and a streaming Node process already carries tens of MiB
   * of not-yet-collected chunks, so small parts keep an upload's memory well inside its bound.
   */
  partBytes: 5 * MiB,
  /**
   * Parts in flight. One: an upload then holds about three parts' worth (the one sent, the one being
   * assembled, lib-storage's copy), whatever the snapshot's size; a second in flight costs more memory
   * than it saves time on a snapshot that uploads in seconds (docs/benchmarks.md has the figures).
   */
  queueSize: 1,
  /** Attempts per request (the SDK's retry with backoff): rides out a few failed requests in a row. */
  maxAttempts: 8,
  /** One request, a part's upload included: a part of 8 MiB at 1 MB/s still fits. */
  requestTimeoutMs: 30_000,
} as const;

/** A manifest is a few hundred bytes of JSON; anything larger is not one of ours. */
export const manifestBytesMax = 64 * 1024;

/** Largest snapshot a restore reads into memory: the replica builds it whole in memory too. */
export const snapshotBytesMax = 4 * 1024 * MiB;
