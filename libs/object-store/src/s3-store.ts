/**
 * S3, or any S3-compatible endpoint, as an object store: a bucket and a key
 * prefix, through `@aws-sdk/client-s3`, with `@aws-sdk/lib-storage`'s
 * multipart upload for streams. Credentials come from the SDK's standard
 * chain (environment, shared files, instance or pod roles) unless given.
 *
 * S3 makes an object visible only when its PutObject or
 * CompleteMultipartUpload succeeds, so `put` shows all of a body or none of
 * it. A failed multipart upload is aborted (its parts deleted); a server
 * that refuses the abort leaves unlisted parts behind, which a bucket's
 * lifecycle rule for incomplete uploads reclaims.
 *
 * Memory: an upload buffers at most `queueSize` parts of `partBytes`
 * (limits.ts) whatever the body's size; `get` and `list` stream and page.
 */
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, NoSuchKey, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import { s3Defaults } from './limits.js';
import { checkKey, checkPrefix, ObjectNotFoundError, type ObjectStore, type StoredObject } from './object-store.js';

export interface S3StoreOptions {
  readonly bucket: string;
  /** Key prefix every object of this store lives under ('' or 'a/b'). */
  readonly prefix: string;
  /** Endpoint URL of an S3-compatible service; absent: AWS's endpoint for the region. */
  readonly endpoint?: string;
  readonly region?: string;
  /** Path-style URLs (endpoint/bucket/key) instead of virtual hosts: what most S3-compatible servers need. */
  readonly forcePathStyle?: boolean;
  /** Absent: the SDK's default credential chain. */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** Attempts per request, the first included (the SDK retries throttling, 5xx, resets and timeouts). */
  readonly maxAttempts?: number;
  /** Longest one request may take, response included; a slower one fails and is retried. */
  readonly requestTimeoutMs?: number;
  readonly partBytes?: number;
  readonly queueSize?: number;
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return err instanceof NoSuchKey || e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
}

export class S3ObjectStore implements ObjectStore {
  readonly url: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly partBytes: number;
  private readonly queueSize: number;

  constructor(options: S3StoreOptions) {
    this.bucket = options.bucket;
    this.prefix = options.prefix.replace(/^\/+|\/+$/g, '');
    if (this.prefix !== '') checkKey(this.prefix);
    this.url = `s3://${this.bucket}${this.prefix === '' ? '' : `/${this.prefix}`}`;
    this.partBytes = options.partBytes ?? s3Defaults.partBytes;
    this.queueSize = options.queueSize ?? s3Defaults.queueSize;
    const requestTimeout = options.requestTimeoutMs ?? s3Defaults.requestTimeoutMs;
    const config: S3ClientConfig = {
      region: options.region ?? s3Defaults.region,
      forcePathStyle: options.forcePathStyle ?? false,
      maxAttempts: options.maxAttempts ?? s3Defaults.maxAttempts,
      // Checksums only where S3 requires them: a streamed body with an SDK checksum is sent with
      // aws-chunked framing, which S3-compatible servers may store as the object's bytes. The
      // snapshot layer checks its own sha256 after every upload.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { requestTimeout, throwOnRequestTimeout: true, socketTimeout: requestTimeout, connectionTimeout: requestTimeout },
      ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
      ...(options.credentials !== undefined ? { credentials: options.credentials } : {}),
    };
    // The SDK warns once per process that its releases after early 2027 need Node 22; this package pins
    // its version, so the warning says nothing about this build and would only clutter the CLI's output.
    process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
    this.client = new S3Client(config);
  }

  private keyOf(key: string): string {
    checkKey(key);
    return this.prefix === '' ? key : `${this.prefix}/${key}`;
  }

  locationOf(key: string): string {
    return `s3://${this.bucket}/${this.keyOf(key)}`;
  }

  async put(key: string, body: Readable | Uint8Array, signal?: AbortSignal): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: this.keyOf(key), Body: body },
      partSize: this.partBytes,
      queueSize: this.queueSize,
      leavePartsOnError: false,
    });
    const abort = (): void => void upload.abort().catch(() => undefined);
    signal?.addEventListener('abort', abort, { once: true });
    try {
      await upload.done();
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  }

  async get(key: string, signal?: AbortSignal): Promise<Readable> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.keyOf(key) }),
        signal ? { abortSignal: signal } : {},
      );
      if (out.Body instanceof Readable) return out.Body;
      throw new Error(`GetObject ${this.locationOf(key)} answered a body that is not a Node stream`);
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFoundError(this.locationOf(key));
      throw err;
    }
  }

  async list(prefix: string, signal?: AbortSignal): Promise<StoredObject[]> {
    checkPrefix(prefix);
    const full = this.prefix === '' ? prefix : `${this.prefix}/${prefix}`;
    const found: StoredObject[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: full, ...(token ? { ContinuationToken: token } : {}) }),
        signal ? { abortSignal: signal } : {},
      );
      for (const o of page.Contents ?? []) {
        if (o.Key === undefined) continue;
        found.push({ key: this.prefix === '' ? o.Key : o.Key.slice(this.prefix.length + 1), bytes: o.Size ?? 0 });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(key: string, signal?: AbortSignal): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.keyOf(key) }), signal ? { abortSignal: signal } : {});
  }

  close(): void {
    this.client.destroy();
  }
}
