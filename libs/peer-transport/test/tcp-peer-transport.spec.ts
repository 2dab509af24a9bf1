/**
 * Goal: the TCP peer transport delivers Raft messages between nodes in order
 * and whole, however TCP splits or joins its frames; it refuses what is not
 * its own (oversized frames, bytes that are not a batch, another cell's
 * batches, a non-member's messages) by closing the connection, saying why
 * and counting the refusal by reason; it tells Raft a peer is
 * unreachable and reconnects when the peer comes back.
 * Method: the peer frame decoder over hand-cut byte streams; a real
 * TcpPeerServer and TcpPeerTransport on 127.0.0.1 ephemeral ports.
 */
import net from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { LogIndex, NodeId, Term } from '@fencer/base';
import { EntryType, type Message } from '@fencer/raft';
import { raftpb } from '@fencer/protocol';
import {
  type PeerLogger,
  TcpPeerServer,
  TcpPeerTransport,
  encodePeerFrame,
  limits,
  messageToWire,
  peerFrameDecoder,
  peerFrameHeaderBytes,
  splitAddress,
  closedByPeer,
} from '../src/index.js';

/** The payload (a RaftBatch's bytes) of a whole frame. */
const payloadOf = (frame: Buffer): Buffer => frame.subarray(peerFrameHeaderBytes);

const a = NodeId('a');
const b = NodeId('b');
const append = (i: number): Message => ({
  type: 'AppendEntries',
  from: a,
  to: b,
  term: Term(3),
  index: LogIndex(i - 1),
  logTerm: Term(3),
  commit: LogIndex(i - 1),
  entries: [{ term: Term(3), index: LogIndex(i), type: EntryType.Normal, data: new Uint8Array([i & 0xff, 7, 7]) }],
});

function recordingLogger(): PeerLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return Object.assign(pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) }), { warnings });
}

/** Resolves when `check` holds, polling on the event loop (no fixed sleeps: it waits for the event). */
async function until(check: () => boolean, what: string, limitMs = 5_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startServer(
  cellId: string,
  got: Message[],
  logger = recordingLogger(),
): Promise<{ server: TcpPeerServer; address: string; logger: typeof logger }> {
  const server = new TcpPeerServer(cellId, (m) => got.push(m), logger);
  await server.listen('127.0.0.1:0');
  cleanups.push(() => server.close());
  return { server, address: `127.0.0.1:${server.port}`, logger };
}

function transport(
  cellId: string,
  onUnreachable: (p: NodeId) => void = () => {},
  onConnectionLost: (p: NodeId) => void = () => {},
): TcpPeerTransport {
  const t = new TcpPeerTransport({
    selfId: a,
    cellId,
    sendQueueMax: 1_000,
    reconnectDelayMs: 20,
    logger: recordingLogger(),
    onUnreachable,
    onConnectionLost,
  });
  cleanups.push(() => t.close());
  return t;
}

describe('frame reader', () => {
  const frames = [1, 2, 3].map((i) => encodePeerFrame({ senderAddress: '', cellId: 'c', messages: [messageToWire(append(i))] }));
  const stream = Buffer.concat(frames);

  it('finds every frame whether chunks split or join them', () => {
    for (const cut of [1, 2, 3, 5, 17, stream.length]) {
      const reader = peerFrameDecoder();
      const out: Buffer[] = [];
      for (let at = 0; at < stream.length; at += cut) {
        const { frames: got, error } = reader.push(stream.subarray(at, at + cut));
        expect(error).toBeUndefined();
        out.push(...got.map(payloadOf));
      }
      expect(out.map((p) => raftpb.RaftBatch.decode(p).messages[0]!.entries[0]!.index)).toEqual([1, 2, 3]);
    }
  });

  it('copies each byte of a big frame once, however many reads it arrives in', () => {
    // 4 MiB of entries arriving in 16 KiB reads: joining the whole buffer on every read would copy ~512 MiB.
    const big = encodePeerFrame({
      senderAddress: '',
      cellId: 'c',
      messages: [
        messageToWire({ ...append(9), entries: [{ index: LogIndex(9), term: Term(3), type: 0, data: new Uint8Array(4 << 20).fill(7) }] }),
      ],
    });
    const reader = peerFrameDecoder();
    const out: Buffer[] = [];
    const wire = Buffer.concat([big, frames[0]!]);
    for (let at = 0; at < wire.length; at += 16 * 1024) out.push(...reader.push(wire.subarray(at, at + 16 * 1024)).frames.map(payloadOf));
    expect(out).toHaveLength(2);
    expect(raftpb.RaftBatch.decode(out[0]!).messages[0]!.entries[0]!.data.length).toBe(4 << 20);
    expect(raftpb.RaftBatch.decode(out[1]!).messages[0]!.entries[0]!.index).toBe(1);
    expect(reader.bytesCopied).toBeLessThanOrEqual(wire.length);
  });

  it('refuses a frame longer than the limit before reading it', () => {
    const header = Buffer.alloc(4);
    header.writeUInt32BE(limits.peerBatchBytesMax + 1, 0);
    expect(peerFrameDecoder().push(header).error).toMatch(/over the .*-byte limit/);
  });
});

describe('TCP peer transport', () => {
  it('delivers many messages in order, batched per synchronous run', async () => {
    const got: Message[] = [];
    const { address } = await startServer('cell-1', got);
    const t = transport('cell-1');
    t.setPeer(b, address);
    for (let run = 0; run < 50; run++) t.send(Array.from({ length: 20 }, (_, k) => append(run * 20 + k + 1)));
    await until(() => got.length === 1_000, '1,000 messages');
    expect(got.map((m) => m.index)).toEqual(Array.from({ length: 1_000 }, (_, k) => k));
    // Entry data arrives as a Buffer view of the frame (a Uint8Array): compare the bytes.
    const last = got[999]!;
    expect({ ...last, entries: last.entries!.map((e) => ({ ...e, data: new Uint8Array(e.data) })) }).toEqual(append(1_000));
  });

  it("closes a connection that sends another cell's batch, and says why", async () => {
    const got: Message[] = [];
    const { address, logger } = await startServer('cell-1', got);
    const t = transport('cell-2');
    t.setPeer(b, address);
    t.send([append(1)]);
    await until(() => logger.warnings.length > 0, 'a warning');
    expect(logger.warnings[0]).toMatch(/belongs to cell cell-1, not cell-2/);
    expect(got).toEqual([]);
  });

  it('closes a connection whose bytes are not batches', async () => {
    const got: Message[] = [];
    const { server, logger } = await startServer('cell-1', got);
    const socket = net.connect(server.port, '127.0.0.1');
    const closed = new Promise((r) => socket.on('close', r));
    socket.on('error', () => {});
    socket.write(Buffer.from([0, 0, 0, 3, 0xff, 0xff, 0xff]));
    await closed;
    expect(logger.warnings[0]).toMatch(/not a RaftBatch/);
    expect(got).toEqual([]);
  });

  it("closes a connection that carries a non-member's message, hands on none of it, and counts each refusal by reason", async () => {
    const got: Message[] = [];
    const refused: string[] = [];
    const logger = recordingLogger();
    const server = new TcpPeerServer('cell-1', (m) => got.push(m), logger, {
      admits: (id) => id === 'a' || id === 'b',
      onRefused: (r) => refused.push(r),
    });
    await server.listen('127.0.0.1:0');
    cleanups.push(() => server.close());
    const send = (bytes: Buffer): Promise<void> =>
      new Promise((resolve) => {
        const socket = net.connect(server.port, '127.0.0.1');
        socket.on('error', () => {});
        socket.on('close', () => resolve());
        socket.end(bytes);
      });
    const intruder = messageToWire({ ...append(1), from: NodeId('intruder'), term: Term(4) });
    const oversized = Buffer.alloc(4);
    oversized.writeUInt32BE(limits.peerBatchBytesMax + 1, 0);
    await send(encodePeerFrame({ senderAddress: '', cellId: 'cell-1', messages: [messageToWire(append(1)), intruder] }));
    await send(encodePeerFrame({ senderAddress: '', cellId: 'cell-2', messages: [messageToWire(append(1))] }));
    await send(Buffer.from([0, 0, 0, 3, 0xff, 0xff, 0xff]));
    await send(oversized);
    expect(got).toEqual([]);
    expect(refused).toEqual(['not-member', 'other-cell', 'undecodable', 'frame-too-large']);
    expect(logger.warnings[0]).toMatch(/"intruder\\", which is not a member of cell cell-1/);
    // Four refusals within a few ms: one warning (the first); the rest are in the counts only.
    expect(logger.warnings).toHaveLength(1);
    // A member's frame on a fresh connection still gets through.
    await send(encodePeerFrame({ senderAddress: '', cellId: 'cell-1', messages: [messageToWire(append(2))] }));
    expect(got.map((m) => m.from)).toEqual(['a']);
  });

  it('reports a peer that is down as unreachable, and reaches it once it is up', async () => {
    const unreachable: NodeId[] = [];
    // Find a free port, then leave it closed: the peer is down.
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const t = transport('cell-1', (p) => unreachable.push(p));
    t.setPeer(b, `127.0.0.1:${port}`);
    t.send([append(1)]);
    await until(() => unreachable.length > 0, 'an unreachable report');
    expect(unreachable[0]).toBe(b);

    const got: Message[] = [];
    const server = new TcpPeerServer('cell-1', (m) => got.push(m), recordingLogger());
    await server.listen(`127.0.0.1:${port}`);
    cleanups.push(() => server.close());
    // Raft retransmits: keep sending as the leader would on its heartbeat, until one gets through.
    let i = 2;
    await until(() => {
      t.send([append(i++)]);
      return got.length > 0;
    }, 'delivery after the peer came up');
    expect(got[0]!.type).toBe('AppendEntries');
  });
});

describe('connection lost (docs/decisions/0021-crash-detection-by-the-transport.md)', () => {
  it('reports the connection lost when the peer closes it, as the kernel does for a dead process', async () => {
    const got: Message[] = [];
    const lost: NodeId[] = [];
    const { server, address } = await startServer('cell-1', got);
    const t = transport(
      'cell-1',
      () => {},
      (p) => lost.push(p),
    );
    t.setPeer(b, address);
    t.send([append(1)]);
    await until(() => got.length === 1, 'the first delivery');
    expect(lost).toEqual([]);
    await server.close();
    await until(() => lost.length > 0, 'a connection-lost report');
    expect(lost[0]).toBe(b);
  });

  it("counts a close or reset as the peer's doing, and a timeout or an unreachable host not", () => {
    const withCode = (code: string): Error => Object.assign(new Error(code), { code });
    expect(closedByPeer(undefined)).toBe(true);
    for (const code of ['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ECONNABORTED']) expect(closedByPeer(withCode(code))).toBe(true);
    for (const code of ['ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']) expect(closedByPeer(withCode(code))).toBe(false);
    expect(closedByPeer(new Error('no code'))).toBe(false);
  });
});

describe('peer addresses', () => {
  it('splits host:port and refuses what is not host:port', () => {
    expect(splitAddress('127.0.0.1:7001')).toEqual({ host: '127.0.0.1', port: 7001 });
    expect(splitAddress('[::1]:7001')).toEqual({ host: '::1', port: 7001 });
    expect(() => splitAddress('localhost')).toThrow(/not host:port/);
    expect(() => splitAddress('localhost:')).toThrow(/not host:port/);
  });
});
