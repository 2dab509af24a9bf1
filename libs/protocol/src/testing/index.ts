/**
 * Test helpers: calls that send raw bytes as a request (an identity
 * serializer), to check how a server answers bytes that are not a message of
 * the contract. For tests only; nothing in a process imports this.
 */
import { Client, Metadata, credentials, status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import net from 'node:net';
import type { FencerError } from '@fencer/base';
import { fromServiceError } from '../errors.js';

const identity = (b: Buffer): Buffer => b;

/** Bytes no decoder takes: field 1 claims 127 bytes and the message ends after one. */
export const NOT_A_MESSAGE: Buffer = Buffer.from([0x0a, 0x7f, 0x41]);

/** How a method takes its request: one message (unary, server streaming) or a stream of them (bidirectional). */
export type RawCallKind = 'unary' | 'server-stream' | 'bidi';

/**
 * Sends `bytes` as the request of method `path` at `address` (for a
 * bidirectional method: as its first message, leaving the stream open) and
 * resolves with the error the call ended with; rejects when it ended OK or
 * not within `timeoutMs`.
 */
export function rawCallError(address: string, path: string, kind: RawCallKind, bytes: Buffer, timeoutMs = 10_000): Promise<FencerError> {
  const client = new Client(address, credentials.createInsecure());
  const options = { deadline: Date.now() + timeoutMs };
  return new Promise<FencerError>((resolve, reject) => {
    const ended = (err: ServiceError | StatusObject | null): void => {
      if (err && err.code !== status.OK) resolve(fromServiceError(err as ServiceError));
      else reject(new Error(`${path} answered OK to bytes that are not its request`));
    };
    if (kind === 'unary') {
      client.makeUnaryRequest(path, identity, identity, bytes, new Metadata(), options, (err) => ended(err));
      return;
    }
    const call =
      kind === 'server-stream'
        ? client.makeServerStreamRequest(path, identity, identity, bytes, new Metadata(), options)
        : client.makeBidiStreamRequest(path, identity, identity, new Metadata(), options);
    call.on('data', () => {});
    call.on('error', (e: ServiceError) => ended(e));
    call.on('status', (s: StatusObject) => s.code === status.OK && ended(s));
    if (kind === 'bidi') (call as ReturnType<Client['makeBidiStreamRequest']>).write(bytes);
  }).finally(() => client.close());
}

/** Connects to 127.0.0.1:`port`, writes `bytes`, half-closes, and resolves once the server has closed the connection too. */
export function sendRaw(port: number, bytes: Uint8Array, limitMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`port ${port} kept a connection open ${limitMs} ms after the test's half-close`));
    }, limitMs);
    socket.on('connect', () => socket.end(bytes));
    socket.on('data', () => {});
    // The server may close before it has read everything (a refused frame): a reset is an answer too.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
