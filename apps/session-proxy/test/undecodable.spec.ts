/**
 * Goal: a session proxy answers request bytes that are not
 * a message of the contract with INVALID_ARGUMENT and a message naming the
 * method, never INTERNAL: on KeepAlive (the stream it carries), on a unary
 * and a server-streaming method it points elsewhere; and a KeepAlive stream
 * ended that way is no longer counted as open (no stream slot leaks).
 * Method: an in-process proxy (buildProxy) on 127.0.0.1:0 with a static
 * routing table (no cell is called); raw bytes sent through a grpc-js Client
 * with an identity serializer (@fencer/protocol/testing's rawCallError).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { NOT_A_MESSAGE, type RawCallKind, rawCallError } from '@fencer/protocol/testing';
import { StaticRoutingSource } from '@fencer/routing';
import { buildProxy, type Proxy } from '../src/index.js';

let proxy: Proxy;
let address: string;

beforeAll(async () => {
  proxy = buildProxy({
    source: new StaticRoutingSource({
      version: 1,
      cells: new Map([['cell-1', { id: 'cell-1', replicas: ['127.0.0.1:1'] }]]),
      routes: new Map([['known', { namespace: 'known', cell: 'cell-1', state: 'active' as const }]]),
    }),
    logger: pino({ level: 'silent' }),
  });
  address = await proxy.listen('127.0.0.1:0');
});
afterAll(async () => {
  await proxy?.close();
});

describe('undecodable request bytes at a session proxy', () => {
  it.each([
    ['KeepAlive', 'bidi'],
    ['Acquire', 'unary'],
    ['Watch', 'server-stream'],
  ] as [string, RawCallKind][])('%s (%s) gets INVALID_ARGUMENT naming the method', async (method, kind) => {
    const e = await rawCallError(address, `/lockservice.v1.LockService/${method}`, kind, NOT_A_MESSAGE);
    expect(`${e.code}: ${e.message}`).toMatch(
      new RegExp(`^INVALID_ARGUMENT: /lockservice.v1.LockService/${method}: the request is not a valid message`),
    );
  });

  it('KeepAlive streams ended by undecodable bytes are not counted as open', async () => {
    for (let i = 0; i < 20; i++) await rawCallError(address, '/lockservice.v1.LockService/KeepAlive', 'bidi', NOT_A_MESSAGE);
    // The proxy learns of each end as a cancellation, on the event loop after the client saw the status.
    const deadline = Date.now() + 5_000;
    let open = -1;
    while (Date.now() < deadline) {
      open = (await proxy.metrics.streams.get()).values[0]?.value ?? 0;
      if (open === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(open).toBe(0);
  });
});
