/**
 * Goal: bad input to a router or a proxy gets the contract's error (status
 * and lock-reason) with a message a person can act on; never INTERNAL,
 * never a crash. Covers wrong types (bytes that are not the message),
 * unknown session ids, unknown namespaces (auto-tenants off), names outside
 * /ls/, and one client stream carrying 10,000 sessions.
 * Method: @fencer/fleet starts 2 cells x 1 cell-node, one router and one
 * proxy on 127.0.0.1 ("known" routed to cell-1); calls go straight to the
 * router or proxy; raw byte payloads go through a grpc-js Client with an
 * identity serializer (@fencer/protocol/testing's rawCallError), on a unary,
 * a server-streaming and a bidirectional method. At the end every process
 * must still run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServiceError } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, lockservice } from '@fencer/protocol';
import { NOT_A_MESSAGE, type RawCallKind, rawCallError } from '@fencer/protocol/testing';
import { TestClient, errorOf } from '@fencer/fleet/contract';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';

let fleet: TestFleet;
let client: TestClient;
let router: string;
let proxy: string;
let sessionId: string;

beforeAll(async () => {
  fleet = await startTestFleet({ cells: 2, replicas: 1, routers: 1, proxies: 1, routes: { known: 'cell-1', other: 'cell-2' } });
  router = fleet.routerEndpoints[0]!;
  proxy = fleet.proxyEndpoints[0]!;
  client = new TestClient([router]);
  sessionId = (await client.openSession('known', 60_000)).sessionId;
}, 180_000);
afterAll(async () => {
  client?.close();
  await fleet?.stop();
});

const acquire = (over: Record<string, unknown>) => ({
  sessionId,
  name: '/ls/known/x',
  mode: 1,
  waitMs: 0,
  requestId: 'r1',
  lockDelayMs: 0,
  ...over,
});

describe("the router answers bad input in the contract's words", () => {
  const cases: [string, string, () => Record<string, unknown>, string, RegExp][] = [
    ['getLock', 'a name outside /ls/', () => ({ name: '/etc/passwd' }), 'INVALID_NAME', /\/ls\//],
    ['acquire', 'a name outside /ls/', () => acquire({ name: '/etc/passwd' }), 'INVALID_NAME', /\/ls\//],
    ['getLock', 'an unknown namespace', () => ({ name: '/ls/nowhere/x' }), 'NAMESPACE_NOT_FOUND', /nowhere.*control plane/],
    ['checkToken', 'an unknown namespace', () => ({ name: '/ls/nowhere/x', token: 1 }), 'NAMESPACE_NOT_FOUND', /nowhere/],
    ['listLocks', 'an unknown namespace', () => ({ prefix: '/ls/nowhere/', limit: 0, pageToken: '' }), 'NAMESPACE_NOT_FOUND', /nowhere/],
    ['openSession', 'an unknown namespace', () => ({ clientId: 'c', ttlMs: 5000, namespace: 'nowhere' }), 'NAMESPACE_NOT_FOUND', /nowhere/],
    ['openSession', 'a namespace with a slash', () => ({ clientId: 'c', ttlMs: 5000, namespace: 'a/b' }), 'INVALID_NAME', /namespace/],
    ['listLocks', 'a prefix spanning namespaces', () => ({ prefix: '/ls/', limit: 0, pageToken: '' }), 'INVALID_NAME', /namespace/],
    [
      'acquire',
      'an unknown session of a known namespace',
      () => acquire({ sessionId: 'known:nosuchsession' }),
      'SESSION_NOT_FOUND',
      /session/,
    ],
    [
      'acquire',
      'a session of an unknown namespace',
      () => acquire({ sessionId: 'nowhere:abc', name: '/ls/nowhere/x' }),
      'SESSION_NOT_FOUND',
      /nowhere/,
    ],
    [
      'release',
      'a malformed session id',
      () => ({ sessionId: 'no-separator', name: '/ls/known/x', token: 1 }),
      'SESSION_NOT_FOUND',
      /malformed/,
    ],
    ['closeSession', 'an empty session id', () => ({ sessionId: '' }), 'SESSION_NOT_FOUND', /empty/],
    ['acquire', 'an unknown mode', () => acquire({ mode: 7 }), 'INVALID_MODE', /mode/],
    ['acquire', 'a name in another namespace', () => acquire({ name: '/ls/other/x' }), 'WRONG_NAMESPACE', /namespace/],
  ];
  it.each(cases)('%s with %s', async (method, _what, request, code, message) => {
    const e = await errorOf(client.once(router, method as never, request()));
    expect(e).toBeInstanceOf(FencerError);
    expect(e.code, e.message).toBe(code);
    expect(e.message).toMatch(message);
    expect(e.leaderHint, 'a cell-internal address never reaches the client').toBeUndefined();
  });

  it('answers a Watch of an unknown namespace NOT_FOUND NAMESPACE_NOT_FOUND', async () => {
    const stream = client.raw(router).watch({ name: '/ls/nowhere/', prefix: true, sinceRevision: 0 });
    const e = await new Promise<FencerError>((resolve) => stream.on('error', (x: ServiceError) => resolve(fromServiceError(x))));
    expect(e.code).toBe('NAMESPACE_NOT_FOUND');
  });
});

describe('wrong types', () => {
  it.each([
    ['GetLock', 'unary'],
    ['Acquire', 'unary'],
    ['Watch', 'server-stream'],
    ['KeepAlive', 'bidi'],
  ] as [string, RawCallKind][])(
    '%s (%s) bytes that are not a message get INVALID_ARGUMENT from the router, not INTERNAL',
    async (method, kind) => {
      const e = await rawCallError(router, `/lockservice.v1.LockService/${method}`, kind, NOT_A_MESSAGE);
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.message).toMatch(new RegExp(`${method}: the request is not a valid message`));
    },
  );

  it('a field of the wrong wire type is ignored, and the missing field is named', async () => {
    // Field 1 (name, a string) sent as a varint.
    const e = await rawCallError(router, '/lockservice.v1.LockService/GetLock', 'unary', Buffer.from([0x08, 0x05]));
    expect(e.code).toBe('INVALID_NAME');
  });

  it('a proxy answers a KeepAlive message that does not decode with INVALID_ARGUMENT', async () => {
    const e = await rawCallError(proxy, '/lockservice.v1.LockService/KeepAlive', 'bidi', Buffer.from([0x0a, 0x7f]));
    expect(e.code).toBe('INVALID_ARGUMENT');
  });
});

describe('the proxy', () => {
  it('points every method but KeepAlive at the routers with INVALID_ARGUMENT', async () => {
    const e = await errorOf(client.once(proxy, 'getLock', { name: '/ls/known/x' }));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.message).toMatch(/KeepAlive only.*router/);
  });

  for (const where of ['proxy', 'router'] as const) {
    it(`answers every heartbeat of one ${where} stream carrying 10,000 sessions: the live one alive, unknown ones expired`, async () => {
      const address = where === 'proxy' ? proxy : router;
      const stream = client.raw(address).keepAlive();
      const ids = [sessionId, ...Array.from({ length: 9_998 }, (_, i) => `known:fake-${i}`), 'nowhere:fake'];
      const answers = new Map<string, lockservice.KeepAliveResponse>();
      const done = new Promise<void>((resolve, reject) => {
        stream.on('data', (a: lockservice.KeepAliveResponse) => {
          answers.set(a.sessionId, a);
          if (answers.size === ids.length) resolve();
        });
        stream.on('error', reject);
      });
      for (const id of ids) stream.write({ sessionId: id });
      await done;
      stream.end();
      expect(answers.get(sessionId)).toMatchObject({ expired: false });
      expect(answers.get(sessionId)!.ttlMsRemaining).toBeGreaterThan(50_000);
      expect(answers.get('known:fake-42')).toMatchObject({ expired: true, ttlMsRemaining: 0 });
      expect(answers.get('nowhere:fake')).toMatchObject({ expired: true, ttlMsRemaining: 0 });
    }, 60_000);
  }
});

describe('afterwards', () => {
  it('every process still runs', () => {
    for (const [id, child] of fleet.children) {
      expect(child.exitCode, id).toBeNull();
      expect(child.signalCode, id).toBeNull();
    }
  });
});
