/**
 * Goal: a TolerantServer answers request bytes that are not a message of the
 * contract with INVALID_ARGUMENT (lock-reason INVALID_ARGUMENT, a message
 * naming the method), for unary, server-streaming and bidirectional methods,
 * before any handler sees them; decodable requests reach the handlers as
 * before. A plain grpc-js Server answers the same bytes INTERNAL (why the
 * class exists).
 * Method: in-process servers on 127.0.0.1:0 serving LockService with
 * handlers that record what reaches them; raw bytes sent through a grpc-js
 * Client with an identity serializer (testing's rawCallError).
 */
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
});

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
