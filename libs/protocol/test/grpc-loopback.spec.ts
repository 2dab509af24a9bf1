/**
 * Goal: the generated grpc-js definitions work end to end: a unary call, a
 * server stream and a bidirectional stream between a loopback server and
 * client, and errors carry the contract's metadata.
 * Method: a real grpc-js server on 127.0.0.1 with a tiny in-test
 * implementation of three LockService calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Server, ServerCredentials, credentials, type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, lockservice, toServiceError } from '../src/index.js';

const { LockServiceClient, LockServiceService, WatchEventType } = lockservice;

let server: Server;
let client: InstanceType<typeof LockServiceClient>;

beforeAll(async () => {
  const impl: lockservice.LockServiceServer = {
    openSession(call, callback) {
      if (call.request.namespace === '') {
        callback(toServiceError(new FencerError('INVALID_ARGUMENT', 'namespace is required', '127.0.0.1:1')) as ServiceError);
        return;
      }
      callback(null, { sessionId: `${call.request.namespace}:abc`, ttlMs: call.request.ttlMs * 2 });
    },
    watch(call) {
      for (let r = call.request.sinceRevision + 1; r <= call.request.sinceRevision + 3; r++) {
        call.write({
          revision: r,
          type: WatchEventType.WATCH_EVENT_TYPE_ACQUIRED,
          name: call.request.name,
          sessionId: 's',
          token: r,
          lock: undefined,
        });
      }
      call.end();
    },
    keepAlive(call) {
      call.on('data', (req: lockservice.KeepAliveRequest) =>
        call.write({ sessionId: req.sessionId, ttlMsRemaining: 1000, expired: false }),
      );
      call.on('end', () => call.end());
    },
    acquire: (_c, cb) => cb(toServiceError(new FencerError('INTERNAL', 'not in this test')) as ServiceError),
    release: (_c, cb) => cb(toServiceError(new FencerError('INTERNAL', 'not in this test')) as ServiceError),
    checkToken: (_c, cb) => cb(toServiceError(new FencerError('INTERNAL', 'not in this test')) as ServiceError),
    getLock: (_c, cb) => cb(toServiceError(new FencerError('INTERNAL', 'not in this test')) as ServiceError),
    listLocks: (_c, cb) => cb(toServiceError(new FencerError('INTERNAL', 'not in this test')) as ServiceError),
    closeSession: (_c, cb) => cb(toServiceError(new FencerError('INTERNAL', 'not in this test')) as ServiceError),
  };
  server = new Server();
  server.addService(LockServiceService, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  client = new LockServiceClient(`127.0.0.1:${port}`, credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
});

describe('generated grpc-js definitions over loopback', () => {
  it('unary: OpenSession', async () => {
    const res = await new Promise<lockservice.OpenSessionResponse>((resolve, reject) =>
      client.openSession({ clientId: 'c1', ttlMs: 6000, namespace: 'payments' }, (err, r) => (err ? reject(err) : resolve(r))),
    );
    expect(res).toEqual({ sessionId: 'payments:abc', ttlMs: 12000 });
  });

  it('unary error: status, reason and leader hint reach the client', async () => {
    const err = await new Promise<ServiceError>((resolve) =>
      client.openSession({ clientId: 'c', ttlMs: 1, namespace: '' }, (e) => resolve(e!)),
    );
    const fe = fromServiceError(err);
    expect(fe.code).toBe('INVALID_ARGUMENT');
    expect(fe.message).toBe('namespace is required');
    expect(fe.leaderHint).toBe('127.0.0.1:1');
  });

  it('server stream: Watch delivers events in order', async () => {
    const stream = client.watch({ name: '/ls/payments/a', prefix: false, sinceRevision: 10 });
    const revisions: number[] = [];
    for await (const ev of stream as AsyncIterable<lockservice.WatchEvent>) revisions.push(ev.revision);
    expect(revisions).toEqual([11, 12, 13]);
  });

  it('bidirectional stream: KeepAlive answers each heartbeat', async () => {
    const stream = client.keepAlive();
    const seen: string[] = [];
    const done = new Promise<void>((resolve) => stream.on('end', () => resolve()));
    stream.on('data', (r: lockservice.KeepAliveResponse) => seen.push(r.sessionId));
    for (const id of ['a:1', 'a:2', 'b:3']) stream.write({ sessionId: id });
    stream.end();
    await done;
    expect(seen).toEqual(['a:1', 'a:2', 'b:3']);
  });
});
