/**
 * Goal: the proxy's KeepAlive stream, served on node:http2 directly
 * (libs/routing keepalive-h2.ts), keeps the contract's wire: every answer
 * due on a stream leaves in one write; a request frame cut across DATA
 * frames, a compressed one (gzip) and a non-ASCII session id are read; bad
 * input gets the contract's errors (undecodable or undecompressable bytes
 * INVALID_ARGUMENT, an oversized message RESOURCE_EXHAUSTED, a passed
 * grpc-timeout DEADLINE_EXCEEDED, a non-gRPC content type HTTP 415), and a
 * stopping proxy ends its streams with UNAVAILABLE SHUTTING_DOWN.
 * Method: an in-process proxy (buildProxy) on 127.0.0.1:0 in front of a fake
 * leader (./support/fake-leader.ts); a node:http2 client writes raw gRPC
 * frames and reads the answer bytes and trailers as they arrive, and a
 * grpc-js client checks what an ordinary client hears.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { gzipSync } from 'node:zlib';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { fromServiceError, lockservice } from '@fencer/protocol';
import { StaticRoutingSource } from '@fencer/routing';
import { pino } from 'pino';
import { buildProxy, type Proxy } from '../src/index.js';
import { fakeLeader } from './support/fake-leader.js';

const PATH = '/lockservice.v1.LockService/KeepAlive';
const WAIT_MS = 10_000;

let proxy: Proxy | undefined;
let leader: Awaited<ReturnType<typeof fakeLeader>> | undefined;
let sessions: ClientHttp2Session[] = [];
afterEach(async () => {
  for (const s of sessions) s.destroy();
  sessions = [];
  await proxy?.close();
  await leader?.close();
  proxy = undefined;
  leader = undefined;
});

async function start(intervalMs = 30): Promise<string> {
  leader = await fakeLeader();
  proxy = buildProxy({
    source: new StaticRoutingSource({
      version: 1,
      cells: new Map([['cell-1', { id: 'cell-1', replicas: [leader.address] }]]),
      routes: new Map([['known', { namespace: 'known', cell: 'cell-1', state: 'active' as const }]]),
    }),
    logger: pino({ level: 'silent' }),
    heartbeatIntervalMs: intervalMs,
  });
  return proxy.listen('127.0.0.1:0');
}

/** A gRPC message frame: flag, 32-bit length, bytes. */
function frame(bytes: Uint8Array, flag = 0, length = bytes.length): Buffer {
  const b = Buffer.alloc(5 + bytes.length);
  b[0] = flag;
  b.writeUInt32BE(length, 1);
  b.set(bytes, 5);
  return b;
}

const request = (sessionId: string): Buffer => Buffer.from(lockservice.KeepAliveRequest.encode({ sessionId }).finish());

interface RawStream {
  readonly stream: ClientHttp2Stream;
  /** Each DATA chunk as it arrived. */
  readonly chunks: Buffer[];
  /** The trailers (or the trailers-only headers), once the stream ended. */
  readonly ended: Promise<IncomingHttpHeaders>;
}

function rawStream(address: string, headers: Record<string, string> = {}): RawStream {
  const session = connect(`http://${address}`);
  sessions.push(session);
  session.on('error', () => {});
  const stream = session.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<IncomingHttpHeaders>((resolve, reject) => {
    let first: IncomingHttpHeaders = {};
    stream.on('response', (h) => (first = h));
    stream.on('trailers', (t) => resolve(t));
    stream.on('end', () => resolve(first));
    stream.on('error', reject);
  });
  return { stream, chunks, ended };
}

/** The session ids of the KeepAliveResponse frames in `bytes`. */
function answered(bytes: Buffer): lockservice.KeepAliveResponse[] {
  const out: lockservice.KeepAliveResponse[] = [];
  for (let at = 0; at < bytes.length;) {
    const len = bytes.readUInt32BE(at + 1);
    out.push(lockservice.KeepAliveResponse.decode(bytes.subarray(at + 5, at + 5 + len)));
    at += 5 + len;
  }
  return out;
}

/** Answers every batch the fake leader gets, until stopped. */
function answerAll(ttlMs: number): () => void {
  const t = setInterval(() => leader!.batches.forEach((b) => b.answer(ttlMs)), 5);
  return () => clearInterval(t);
}

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('the KeepAlive stream on node:http2', () => {
  it('writes every answer of a batch on a stream in one DATA chunk', async () => {
    const s = rawStream(await start());
    const ids = ['known:a', 'known:b', 'known:c', 'known:d', 'known:e'];
    s.stream.write(Buffer.concat(ids.map((id) => frame(request(id)))));
    const batch = await leader!.next();
    expect([...batch.sessionIds].sort()).toEqual(ids);
    batch.answer(7000);
    await until('the answers', () => s.chunks.length > 0);
    await new Promise((r) => setTimeout(r, 50));
    expect(s.chunks.length, 'one write for the batch').toBe(1);
    const got = answered(s.chunks[0]!);
    expect(got.map((a) => a.sessionId).sort()).toEqual(ids);
    expect(got.every((a) => a.ttlMsRemaining === 7000 && !a.expired)).toBe(true);
    s.stream.end();
    expect((await s.ended)['grpc-status']).toBe('0');
  });

  it('reads a frame cut across DATA frames, a gzip-compressed one and a non-ASCII session id', async () => {
    const address = await start();
    const stop = answerAll(5000);
    try {
      const s = rawStream(address, { 'grpc-encoding': 'gzip' });
      const bytes = Buffer.concat([frame(request('known:cut')), frame(gzipSync(request('known:zip')), 1), frame(request('known:é'))]);
      for (const b of bytes) await new Promise<void>((resolve) => s.stream.write(Buffer.from([b]), () => resolve()));
      await until('three answers', () => answered(Buffer.concat(s.chunks)).length === 3);
      expect(
        answered(Buffer.concat(s.chunks))
          .map((a) => a.sessionId)
          .sort(),
      ).toEqual(['known:cut', 'known:zip', 'known:é']);
      s.stream.end();
      await s.ended;
    } finally {
      stop();
    }
  });

  it.each([
    ['bytes that are not a message', frame(Buffer.from([0x0a, 0x7f, 0x41])), {}, '3', /KeepAlive: the request is not a valid message/],
    ['a compressed flag without an encoding', frame(request('known:a'), 1), {}, '3', /compressed flag 1 with grpc-encoding identity/],
    ['gzip bytes that do not inflate', frame(Buffer.from('not gzip'), 1), { 'grpc-encoding': 'gzip' }, '3', /do not decompress/],
    ['a message over 4 MiB', frame(Buffer.alloc(0), 0, 5 * 1024 * 1024), {}, '8', /over the 4194304-byte limit/],
  ])('answers %s with its status and a reason, not INTERNAL', async (_what, bytes, headers, code, message) => {
    const s = rawStream(await start(), headers);
    s.stream.end(bytes);
    const t = await s.ended;
    expect(t['grpc-status']).toBe(code);
    expect(decodeURI(String(t['grpc-message']))).toMatch(message);
    expect(t['lock-reason']).toBeDefined();
  });

  it('ends a stream at its grpc-timeout with DEADLINE_EXCEEDED', async () => {
    const s = rawStream(await start(), { 'grpc-timeout': '200m' });
    const t = await s.ended;
    expect(t['grpc-status']).toBe('4');
  });

  it('answers a non-gRPC content type with HTTP 415', async () => {
    const s = rawStream(await start(), { 'content-type': 'text/plain' });
    const h = await s.ended;
    expect(h[':status']).toBe(415);
  });

  it('ends its open streams with UNAVAILABLE SHUTTING_DOWN when it stops, as a grpc-js client hears it', async () => {
    const address = await start();
    const c = new lockservice.LockServiceClient(address, credentials.createInsecure());
    try {
      const stream = c.keepAlive();
      const stop = answerAll(5000);
      const first = new Promise((resolve) => stream.once('data', resolve));
      stream.write({ sessionId: 'known:a' });
      await first;
      stop();
      const e = new Promise<ServiceError>((resolve) => stream.on('error', resolve));
      await proxy!.close();
      proxy = undefined;
      const fe = fromServiceError(await e);
      expect(fe.code).toBe('SHUTTING_DOWN');
    } finally {
      c.close();
    }
  });
});
