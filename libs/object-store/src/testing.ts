/**
 * Test helpers (the `@fencer/object-store/testing` entry): a real S3 server
 * (s3rver, from npm) in a child process of the test, and a fault proxy in
 * front of any HTTP server that fails a share of requests with a 5xx, a
 * reset connection, a stall past the client's timeout, or a slow body.
 *
 * s3rver runs in its own process started with `--openssl-legacy-provider`
 * (without it, truncated ListObjectsV2 pages fail), on 127.0.0.1 and a port
 * it picks, storing under a folder the test owns. Stop it with `stop()`,
 * which kills that process by its PID.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { S3ObjectStore, type S3StoreOptions } from './s3-store.js';

/** s3rver's fixed credentials, which it checks signatures against. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

export interface S3rverProcess {
  readonly endpoint: string;
  readonly bucket: string;
  readonly pid: number;
  /** A store on this server (path-style, s3rver's credentials), with `options` for the rest. */
  store(prefix?: string, options?: Partial<S3StoreOptions>): S3ObjectStore;
  stop(): Promise<void>;
}

const STARTUP_MS_MAX = 30_000;

/** Starts s3rver on 127.0.0.1 with one bucket, storing under `directory`. */
export async function startS3rver(directory: string, bucket = 'fencer-snapshots'): Promise<S3rverProcess> {
  const s3rverMain = createRequire(import.meta.url).resolve('s3rver');
  const script = [
    `const S3rver = require(${JSON.stringify(s3rverMain)});`,
    `new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: ${JSON.stringify(directory)},`,
    `  configureBuckets: [{ name: ${JSON.stringify(bucket)} }] })`,
    `  .run().then((a) => console.log('S3RVER_PORT ' + a.port), (e) => { console.error(e); process.exit(1); });`,
    `process.on('SIGTERM', () => process.exit(0));`,
  ].join('\n');
  const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`s3rver did not start within ${STARTUP_MS_MAX} ms: ${out}`)), STARTUP_MS_MAX);
    const onData = (chunk: Buffer): void => {
      out += chunk.toString();
      const m = /S3RVER_PORT (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`s3rver exited (${code}) before serving: ${out}`));
    });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    pid: child.pid!,
    store: (prefix = '', options = {}) =>
      new S3ObjectStore({ bucket, prefix, endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS, ...options }),
    stop: () => stopChild(child),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(killer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export type Fault = 'status-500' | 'status-503' | 'reset' | 'stall' | 'slow-body';

export interface FaultProxyOptions {
  /** Share of requests that get a fault, 0..1. */
  readonly failShare: number;
  /** The faults to draw from, each equally likely. */
  readonly faults: readonly Fault[];
  /** Seeded draws make a run repeatable (a small LCG; the seed is printed by the test). */
  readonly seed: number;
  /** How long a slow body trickles: a delay between each chunk of the forwarded request body. */
  readonly slowChunkDelayMs?: number;
  /** Keep "METHOD url" of every request in `requests` (the last 10,000). */
  readonly recordRequests?: boolean;
}

export interface FaultProxy {
  readonly endpoint: string;
  /** Requests seen, and faults injected by kind. */
  readonly counts: { requests: number; faults: Record<string, number> };
  /** "METHOD url" of each request, with `recordRequests`. */
  readonly requests: string[];
  /** Changes the share of failing requests from now on. */
  setFailShare(share: number): void;
  close(): Promise<void>;
}

/** An HTTP proxy on 127.0.0.1 in front of `target` (http://host:port) that injects faults into a share of requests. */
export async function startFaultProxy(target: string, options: FaultProxyOptions): Promise<FaultProxy> {
  const to = new URL(target);
  let state = options.seed >>> 0 || 1;
  const draw = (): number => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  let failShare = options.failShare;
  const counts = { requests: 0, faults: {} as Record<string, number> };
  const sockets = new Set<Socket>();
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    counts.requests++;
    if (options.recordRequests) {
      requests.push(`${req.method} ${req.url}`);
      if (requests.length > 10_000) requests.shift();
    }
    const fault = draw() < failShare ? options.faults[Math.floor(draw() * options.faults.length)] : undefined;
    if (fault !== undefined) counts.faults[fault] = (counts.faults[fault] ?? 0) + 1;
    handle(req, res, to, fault, options.slowChunkDelayMs ?? 20);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    requests,
    setFailShare: (share) => (failShare = share),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function handle(req: IncomingMessage, res: ServerResponse, to: URL, fault: Fault | undefined, slowChunkDelayMs: number): void {
  if (fault === 'status-500' || fault === 'status-503') {
    req.resume();
    const code = fault === 'status-500' ? 500 : 503;
    const name = code === 500 ? 'InternalError' : 'SlowDown';
    res.writeHead(code, { 'content-type': 'application/xml' });
    res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${name}</Code><Message>injected</Message></Error>`);
    return;
  }
  if (fault === 'reset') {
    // Half the body reaches the server first, then the connection dies: a part that may or may not have landed.
    forward(req, res, to, { resetAfterBytes: Number(req.headers['content-length'] ?? 0) / 2 });
    return;
  }
  if (fault === 'stall') {
    // Never answered: the client's request timeout ends it.
    req.resume();
    return;
  }
  forward(req, res, to, fault === 'slow-body' ? { chunkDelayMs: slowChunkDelayMs } : {});
}

function forward(req: IncomingMessage, res: ServerResponse, to: URL, how: { resetAfterBytes?: number; chunkDelayMs?: number }): void {
  const upstream = httpRequest({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', () => res.destroy());
  let sent = 0;
  req.on('data', (chunk: Buffer) => {
    if (how.resetAfterBytes !== undefined && sent + chunk.length > how.resetAfterBytes) {
      upstream.destroy();
      req.socket.destroy();
      return;
    }
    sent += chunk.length;
    if (!upstream.write(chunk)) req.pause();
    if (how.chunkDelayMs !== undefined) {
      req.pause();
      setTimeout(() => req.resume(), how.chunkDelayMs);
    }
  });
  upstream.on('drain', () => req.resume());
  req.on('end', () => {
    if (how.resetAfterBytes !== undefined && how.resetAfterBytes <= 0) {
      upstream.destroy();
      req.socket.destroy();
      return;
    }
    upstream.end();
  });
}
