/**
 * Goal: a listener's HTTP/2 opening check (connection-guard.ts) hands on a
 * connection whose preface and SETTINGS arrived whole, with every byte it
 * read put back in order, even when they come in pieces; and drops at once
 * a connection that is not HTTP/2, whose first frame is not a client's
 * SETTINGS, or that sends a message (DATA) before any call (HEADERS), one that stalls mid-frame (the timeout), and one that half-closes
 * before its opening is complete.
 * Method: a net server on 127.0.0.1 port 0 running awaitHttp2Opening on each
 * connection; clients write byte strings; the test waits for the verdict
 * (ready with the bytes read back, or the refusal's reason and the close).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HTTP2_PREFACE, type OpeningRefusal, awaitHttp2Opening, judgeOpening } from '../src/index.js';

type Verdict = { ready: Buffer } | { refused: OpeningRefusal };
const verdicts: ((v: Verdict) => void)[] = [];
let server: net.Server;
let port = 0;
const TIMEOUT_MS = 300;

beforeAll(async () => {
  server = net.createServer((socket) => {
    const tell = verdicts.shift()!;
    awaitHttp2Opening(
      socket,
      (s) => {
        // What the next reader (grpc-js) would get: every byte, from the first.
        let got = Buffer.alloc(0);
        s.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
        s.on('end', () => tell({ ready: got }));
        s.resume();
      },
      { timeoutMs: TIMEOUT_MS, onRefused: (reason) => tell({ refused: reason }) },
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const SETTINGS = Buffer.from([0, 0, 12, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100, 0, 4, 0, 1, 0, 0]);

/** Connects, writes each piece (a tick apart), then half-closes; resolves with the server's verdict and whether the client saw the close. */
async function send(pieces: Buffer[], halfClose = true): Promise<{ verdict: Verdict; closed: Promise<void> }> {
  const verdict = new Promise<Verdict>((r) => verdicts.push(r));
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  await new Promise<void>((r) => socket.on('connect', () => r()));
  for (const p of pieces) {
    socket.write(p);
    await new Promise((r) => setImmediate(r));
  }
  if (halfClose) socket.end();
  const v = await verdict;
  socket.destroy();
  return { verdict: v, closed };
}

describe('the HTTP/2 opening check', () => {
  it('hands on a whole opening with every byte in order, also when it comes in pieces and more follows', async () => {
    const more = Buffer.from([0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    const all = Buffer.concat([HTTP2_PREFACE, SETTINGS, more]);
    const { verdict } = await send([all.subarray(0, 5), all.subarray(5, 30), all.subarray(30)]);
    expect(verdict).toEqual({ ready: all });
  });

  it('drops what is not HTTP/2, and a first frame that is not a SETTINGS of stream 0', async () => {
    expect((await send([Buffer.from('GET / HTTP/1.1\r\n\r\n')], false)).verdict).toEqual({ refused: 'not-http2' });
    const data = Buffer.from([0, 0, 2, 0, 1, 0, 0, 0, 1, 7, 7]);
    expect((await send([HTTP2_PREFACE, data], false)).verdict).toEqual({ refused: 'bad-settings' });
    // A gRPC message (DATA) with no call (HEADERS) before it: nghttp2 would ignore it and keep the connection.
    const message = Buffer.from([0, 0, 5, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 9]);
    expect((await send([Buffer.concat([HTTP2_PREFACE, SETTINGS, message])], false)).verdict).toEqual({ refused: 'data-before-headers' });
    const ack = Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]);
    expect((await send([HTTP2_PREFACE, ack], false)).verdict).toEqual({ refused: 'bad-settings' });
  });

  it('drops a connection that stalls mid-frame when the timeout passes, and one that half-closes first', async () => {
    const lying = Buffer.from([0, 0, 60, 4, 0, 0, 0, 0, 0, 1, 2, 3]);
    const started = Date.now();
    const stalled = await send([HTTP2_PREFACE, lying], false);
    expect(stalled.verdict).toEqual({ refused: 'timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    await stalled.closed;
    expect((await send([HTTP2_PREFACE, lying], true)).verdict).toEqual({ refused: 'closed' });
  });

  it('judges byte strings: incomplete while they can still become an opening', () => {
    expect(judgeOpening(HTTP2_PREFACE.subarray(0, 3))).toEqual({ verdict: 'incomplete' });
    expect(judgeOpening(Buffer.concat([HTTP2_PREFACE, SETTINGS.subarray(0, 12)]))).toEqual({ verdict: 'incomplete' });
    expect(judgeOpening(Buffer.concat([HTTP2_PREFACE, SETTINGS]))).toEqual({
      verdict: 'complete',
      length: HTTP2_PREFACE.length + SETTINGS.length,
    });
    const odd = Buffer.from([0, 0, 5, 4, 0, 0, 0, 0, 0]);
    expect(judgeOpening(Buffer.concat([HTTP2_PREFACE, odd]))).toEqual({ verdict: 'bad-settings' });
  });
});
