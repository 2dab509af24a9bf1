/**
 * Goal: bad input gets the contract's status and lock-reason, with a message
 * a person can act on, and never crashes a process.
 * Method: malformed calls against every replica of a real cell (leader and
 * followers), then check that all five processes are still alive.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencerError } from '@fencer/base';
import { ERROR_TABLE, isRetryable } from '@fencer/protocol';
import { type Cell, startCell } from './support/cell.js';

let cell: Cell;
let sessionId: string;

beforeAll(async () => {
  cell = await startCell();
  sessionId = (await cell.client.openSession('bad', 60_000)).sessionId;
});
afterAll(async () => {
  await cell?.stop();
});

async function errorOf(p: Promise<unknown>): Promise<FencerError> {
  try {
    await p;
  } catch (e) {
    return e as FencerError;
  }
  throw new Error('expected the call to fail');
}

const acquire = (over: Record<string, unknown>) => ({
  sessionId,
  name: '/ls/bad/x',
  mode: 1,
  waitMs: 0,
  requestId: 'r1',
  lockDelayMs: 0,
  ...over,
});

const cases: [string, string, () => Record<string, unknown>, string, RegExp][] = [
  ['acquire', 'a name outside /ls/', () => acquire({ name: '/etc/passwd' }), 'INVALID_NAME', /\/ls\//],
  ['acquire', 'an empty segment', () => acquire({ name: '/ls/bad//x' }), 'INVALID_NAME', /segment/i],
  ['acquire', 'a ".." segment', () => acquire({ name: '/ls/bad/../x' }), 'INVALID_NAME', /\.\./],
  ['acquire', 'a forbidden character', () => acquire({ name: '/ls/bad/a b' }), 'INVALID_NAME', /A-Za-z0-9/],
  ['acquire', 'a name longer than 512 bytes', () => acquire({ name: `/ls/bad/${'x'.repeat(600)}` }), 'INVALID_NAME', /512/],
  ['acquire', 'an unknown mode', () => acquire({ mode: 7 }), 'INVALID_MODE', /mode/],
  ['acquire', 'a missing request id', () => acquire({ requestId: '' }), 'MISSING_REQUEST_ID', /request_id/],
  ['acquire', 'a name in another namespace', () => acquire({ name: '/ls/other/x' }), 'WRONG_NAMESPACE', /namespace/],
  ['acquire', 'an unknown session', () => acquire({ sessionId: 'bad:nosuchsession' }), 'SESSION_NOT_FOUND', /session/],
  ['acquire', 'a malformed session id', () => acquire({ sessionId: 'no-separator' }), 'SESSION_NOT_FOUND', /session/],
  ['acquire', 'an empty session id', () => acquire({ sessionId: '' }), 'SESSION_NOT_FOUND', /session/],
  ['release', 'an unknown session', () => ({ sessionId: 'bad:nosuch', name: '/ls/bad/x', token: 1 }), 'SESSION_NOT_FOUND', /session/],
  ['closeSession', 'an unknown session', () => ({ sessionId: 'bad:nosuch' }), 'SESSION_NOT_FOUND', /session/],
  ['openSession', 'a namespace with a slash', () => ({ clientId: 'c', ttlMs: 5000, namespace: 'a/b' }), 'INVALID_NAME', /namespace/],
  ['openSession', 'an empty namespace', () => ({ clientId: 'c', ttlMs: 5000, namespace: '' }), 'INVALID_NAME', /namespace/],
  ['getLock', 'a malformed name', () => ({ name: 'nope' }), 'INVALID_NAME', /\/ls\//],
  ['checkToken', 'a malformed name', () => ({ name: '/ls/', token: 1 }), 'INVALID_NAME', /.+/],
  ['listLocks', 'a prefix spanning namespaces', () => ({ prefix: '/ls/', limit: 0, pageToken: '' }), 'INVALID_NAME', /namespace/],
];

describe('bad input gets the contract code and reason, on every replica', () => {
  it.each(cases)('%s with %s', async (method, _what, request, code, message) => {
    for (const r of cell.replicas) {
      const e = await errorOf(cell.client.once(r.grpc, method as never, request()));
      expect(e, `${method} on ${r.id}`).toBeInstanceOf(FencerError);
      expect(e.code, `${method} on ${r.id}: ${e.message}`).toBe(code);
      expect(e.message).toMatch(message);
    }
    // The status code travels as the table says.
    expect(ERROR_TABLE[code as keyof typeof ERROR_TABLE].grpc).toBeGreaterThan(0);
  });

  it('clamps TTL 0 to the default and TTL 2^63 to the maximum rather than failing', async () => {
    expect((await cell.client.openSession('bad', 0)).ttlMs).toBe(12_000);
    expect((await cell.client.openSession('bad', 2 ** 63)).ttlMs).toBe(3_600_000);
  });

  it('refuses an oversized message with RESOURCE_EXHAUSTED and a reason the client does not retry', async () => {
    const e = await errorOf(cell.client.once(cell.replicas[0]!.grpc, 'acquire', acquire({ requestId: 'x'.repeat(5 * 1024 * 1024) })));
    expect(e.code).toBe('MESSAGE_TOO_LARGE');
    expect(isRetryable(e.code)).toBe(false);
    expect(e.message).toMatch(/larger than max|message/i);
  });

  it('leaves every process running', async () => {
    for (const [id, child] of cell.children) {
      expect(child.exitCode, id).toBeNull();
      expect(child.signalCode, id).toBeNull();
      expect((await cell.statusOf(id))?.nodeId).toBe(id);
    }
  });
});
