/**
 * Goal: a cell node answers request bytes that are not a
 * message of the contract with INVALID_ARGUMENT and a message naming the
 * method, never INTERNAL, on every gRPC service it serves: the lock service
 * (unary, server streaming, bidirectional), the internal HeartbeatBatch, and
 * the admin service; and goes on serving.
 * Method: one cell-node process on 127.0.0.1 (tools/fleet/test-cell); raw
 * bytes sent through a grpc-js Client with an identity serializer
 * (@fencer/protocol/testing's rawCallError).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOT_A_MESSAGE, type RawCallKind, rawCallError } from '@fencer/protocol/testing';
import { type Cell, startCell } from './support/cell.js';

let cell: Cell;

beforeAll(async () => {
  cell = await startCell({ replicas: 1 });
});
afterAll(async () => {
  await cell?.stop();
});

describe('undecodable request bytes', () => {
  const calls: [string, 'lock' | 'admin', RawCallKind][] = [
    ['/lockservice.v1.LockService/Acquire', 'lock', 'unary'],
    ['/lockservice.v1.LockService/OpenSession', 'lock', 'unary'],
    ['/lockservice.v1.LockService/Watch', 'lock', 'server-stream'],
    ['/lockservice.v1.LockService/KeepAlive', 'lock', 'bidi'],
    ['/fencer.internal.v1.CellInternal/HeartbeatBatch', 'lock', 'unary'],
    ['/fencer.admin.v1.CellAdmin/Status', 'admin', 'unary'],
  ];

  it.each(calls)('%s on the %s port (%s) gets INVALID_ARGUMENT naming the method', async (path, port, kind) => {
    const r = cell.replicas[0]!;
    const e = await rawCallError(port === 'lock' ? r.grpc : r.admin, path, kind, NOT_A_MESSAGE);
    expect(`${e.code}: ${e.message}`).toMatch(new RegExp(`^INVALID_ARGUMENT: ${path}: the request is not a valid message of the contract`));
  });

  it('the node still serves afterwards', async () => {
    const r = cell.replicas[0]!;
    expect(cell.children.get(r.id)!.exitCode).toBeNull();
    const session = await cell.client.openSession('undecodable', 10_000);
    expect(session.sessionId).toMatch(/^undecodable:/);
  });
});
