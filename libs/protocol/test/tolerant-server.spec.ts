/**
 * Goal: a TolerantServer answers request bytes that are not a message of the
 * contract with INVALID_ARGUMENT (lock-reason INVALID_ARGUMENT, a message
 * naming the method), for unary, server-streaming and bidirectional methods,
 * before any handler sees them; decodable requests reach the handlers as
 * before. A message flagged compressed whose bytes do not decompress gets
 * INVALID_ARGUMENT too. A plain grpc-js Server answers both INTERNAL (why
 * the class exists).
 * Method: in-process servers on 127.0.0.1:0 serving LockService with
 * handlers that record what reaches them; raw bytes sent through a grpc-js
 * Client with an identity serializer (testing's rawCallError), or as
 * hand-made HTTP/2 requests (node:http2) for the compression flag.
 */
import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Metadata, Server, ServerCredentials, credentials, status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { TolerantServer, fromServiceError, lockservice, toServiceError } from '../src/index.js';
import { NOT_A_MESSAGE, type RawCallKind, rawCallError } from '../src/testing/index.js';

const methods: [string, RawCallKind][] = [
  ['Acquire', 'unary'],
  ['Watch', 'server-stream'],
  ['KeepAlive', 'bidi'],
];

const reached: string[] = [];
const servers: Server[] = [];
let tolerant = '';
let plain = '';

function handlers(): lockservice.LockServiceServer {
  const refuse = (method: string) => (call: { request?: unknown }, cb: (e: ServiceError) => void) => {
    reached.push(method);
    cb(toServiceError(new FencerError('NOT_FOUND', 'handler reached')) as ServiceError);
  };
  return {
    acquire: refuse('acquire'),
    openSession: refuse('openSession'),
    release: refuse('release'),
    checkToken: refuse('checkToken'),
    getLock: refuse('getLock'),
    listLocks: refuse('listLocks'),
    closeSession: refuse('closeSession'),
    watch(call) {
      reached.push('watch');
      call.emit('error', toServiceError(new FencerError('NOT_FOUND', 'handler reached')));
    },
    keepAlive(call) {
      call.on('data', (req: lockservice.KeepAliveRequest) => {
        reached.push(`keepAlive ${req.sessionId}`);
        call.write({ sessionId: req.sessionId, ttlMsRemaining: 1, expired: false });
      });
      call.on('end', () => call.end());
    },
  };
}

async function serve(server: Server): Promise<string> {
  server.addService(lockservice.LockServiceService, handlers());
  servers.push(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return `127.0.0.1:${port}`;
}

beforeAll(async () => {
  tolerant = await serve(new TolerantServer());
  plain = await serve(new Server());
});
afterAll(() => {
  for (const s of servers) s.forceShutdown();
});

describe('TolerantServer', () => {
  it.each(methods)('answers %s (%s) bytes that do not decode with INVALID_ARGUMENT, and no handler sees them', async (method, kind) => {
    reached.length = 0;
    const e = await rawCallError(tolerant, `/lockservice.v1.LockService/${method}`, kind, NOT_A_MESSAGE);
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.message).toMatch(new RegExp(`LockService/${method}: the request is not a valid message of the contract`));
    expect(reached).toEqual([]);
  });

  it('passes decodable requests to the handlers, on every kind of method', async () => {
    reached.length = 0;
    const client = new lockservice.LockServiceClient(tolerant, credentials.createInsecure());
    const unary = await new Promise<ServiceError | null>((resolve) =>
      client.acquire({ sessionId: 's', name: '/ls/a/b', mode: 1, waitMs: 0, requestId: 'r', lockDelayMs: 0 }, (e) => resolve(e)),
    );
    expect(unary?.details).toBe('handler reached');
    const watch = client.watch({ name: '/ls/a/', prefix: true, sinceRevision: 0 });
    const watchError = await new Promise<ServiceError>((resolve) => watch.on('error', resolve));
    expect(watchError.details).toBe('handler reached');
    const stream = client.keepAlive();
    const answer = await new Promise<lockservice.KeepAliveResponse>((resolve) => {
      stream.on('data', resolve);
      stream.write({ sessionId: 'a:1' });
    });
    stream.end();
    client.close();
    expect(answer.sessionId).toBe('a:1');
    expect(reached).toEqual(['acquire', 'watch', 'keepAlive a:1']);
  });

  it('a KeepAlive stream whose first message was answered is ended by an undecodable second one', async () => {
    reached.length = 0;
    const good = Buffer.from(lockservice.KeepAliveRequest.encode({ sessionId: 'a:2' }).finish());
    const e = await keepAliveGoodThenBad(good);
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(reached).toEqual(['keepAlive a:2']);
  });

  it('a plain grpc-js Server answers the same bytes INTERNAL', async () => {
    const e = await rawCallError(plain, '/lockservice.v1.LockService/Acquire', 'unary', NOT_A_MESSAGE);
    expect(e.code).toBe('INTERNAL');
  });

  it.each([
    ['Acquire', 'gzip'],
    ['Acquire', 'deflate'],
    ['KeepAlive', 'gzip'],
  ])('answers a %s message flagged %s-compressed that does not decompress with INVALID_ARGUMENT', async (method, encoding) => {
    reached.length = 0;
    const path = `/lockservice.v1.LockService/${method}`;
    const answer = await compressedFlagCall(tolerant, path, encoding, NOT_A_MESSAGE);
    expect(answer).toMatchObject({ status: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT' });
    expect(answer.message).toContain(`${path}: the request message is flagged compressed`);
    expect(reached).toEqual([]);
  });

  it('still serves a message that is compressed whole', async () => {
    reached.length = 0;
    const body = Buffer.from(
      lockservice.AcquireRequest.encode({ sessionId: 's', name: '/ls/a/b', mode: 1, waitMs: 0, requestId: 'r', lockDelayMs: 0 }).finish(),
    );
    const answer = await compressedFlagCall(tolerant, '/lockservice.v1.LockService/Acquire', 'gzip', gzipSync(body));
    expect(answer).toMatchObject({ status: status.NOT_FOUND, message: 'handler reached' });
    expect(reached).toEqual(['acquire']);
  });

  it('a plain grpc-js Server answers a message that does not decompress INTERNAL', async () => {
    const answer = await compressedFlagCall(plain, '/lockservice.v1.LockService/Acquire', 'gzip', NOT_A_MESSAGE);
    expect(answer.status).toBe(status.INTERNAL);
  });
});

/**
 * One gRPC request written by hand over HTTP/2: a single message whose
 * compressed flag is set, under `grpc-encoding: encoding`. The call's
 * status, message and lock-reason, from its trailers (or its trailers-only
 * answer).
 */
async function compressedFlagCall(
  address: string,
  path: string,
  encoding: string,
  bytes: Buffer,
): Promise<{ status: number; message: string; reason?: string }> {
  const session = http2.connect(`http://${address}`);
  try {
    return await new Promise((resolve, reject) => {
      session.on('error', reject);
      const req = session.request({
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-encoding': encoding,
      });
      const done = (h: http2.IncomingHttpHeaders): void => {
        if (h['grpc-status'] === undefined) return;
        resolve({
          status: Number(h['grpc-status']),
          message: decodeURIComponent(String(h['grpc-message'] ?? '')),
          reason: h['lock-reason'] as string | undefined,
        });
      };
      req.on('response', done);
      req.on('trailers', done);
      req.on('error', reject);
      req.on('data', () => {});
      const frame = Buffer.alloc(5 + bytes.length);
      frame.writeUInt8(1, 0);
      frame.writeUInt32BE(bytes.length, 1);
      bytes.copy(frame, 5);
      req.end(frame);
    });
  } finally {
    session.close();
  }
}

/** A KeepAlive stream that sends `first` (a good message), waits for its answer, then sends bytes that do not decode. */
async function keepAliveGoodThenBad(first: Buffer): Promise<FencerError> {
  const client = new Client(tolerant, credentials.createInsecure());
  const identity = (b: Buffer): Buffer => b;
  const call = client.makeBidiStreamRequest('/lockservice.v1.LockService/KeepAlive', identity, identity, new Metadata(), {
    deadline: Date.now() + 10_000,
  });
  try {
    return await new Promise<FencerError>((resolve, reject) => {
      call.on('data', () => call.write(NOT_A_MESSAGE));
      call.on('error', (e: ServiceError) => resolve(fromServiceError(e)));
      call.on('status', (st: StatusObject) => st.code === status.OK && reject(new Error('the stream ended OK')));
      call.write(first);
    });
  } finally {
    client.close();
  }
}
