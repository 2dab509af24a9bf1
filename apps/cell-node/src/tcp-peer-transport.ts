/**
 * The TCP peer transport: one plain TCP connection per directed link
 * carrying length-prefixed frames, each frame one `fencer.raft.v1.RaftBatch`
 * (the same protobuf message the gRPC transport streams). It exists because
 * the peer path is the cell's hottest: every log write is one batch to each
 * follower and one answer back, and a gRPC stream message costs twice the CPU
 * of a frame on a socket (HTTP/2 framing, grpc-js filters and stream
 * machinery); see docs/benchmarks.md, cell section.
 *
 * Frame: a 4-byte big-endian payload length, then the payload. A receiver
 * closes a connection that sends a frame longer than `frameBytesMax`, a
 * payload that is not a RaftBatch, a batch for another cell, or a message
 * from a sender it does not take (peer-codec.ts takeBatch), counts the
 * refusal by reason and says why in its log (one warning per 10 s at most,
 * refusal-log.ts). Batching, queue bounds and dropping are those of the gRPC
 * transport: messages handed over in one synchronous run leave as one frame
 * in a microtask after it; a link with a full queue, a full socket buffer or
 * no connection drops messages (Raft retransmits) and reports the peer
 * unreachable so the leader falls back to probing.
 */
import net from 'node:net';
import { raftpb } from '@fencer/protocol';
import type { Message } from '@fencer/raft';
import { type PeerIntake, StreamRefusal, takeBatch } from './peer-codec.js';
import type { Logger } from './logger.js';
import { BatchingLink, LinkedPeerTransport, type PeerTransportOptions } from './peer-transport.js';
import { splitAddress } from './address.js';
import { RefusalLog } from './refusal-log.js';

/** Largest frame accepted or sent: a batch of snapshot chunks or entries, with room to spare. */
export const frameBytesMax = 64 * 1024 * 1024;
const headerBytes = 4;
/** Bytes buffered in a socket (unsent) before the link counts as blocked and drops new messages. */
const socketBufferBytesMax = 8 * 1024 * 1024;

/** Encodes one batch as a frame: length prefix and protobuf payload in one buffer (one write, one syscall). */
export function encodeFrame(batch: raftpb.RaftBatch): Buffer {
  const payload = raftpb.RaftBatch.encode(batch).finish();
  const frame = Buffer.allocUnsafe(headerBytes + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  frame.set(payload, headerBytes);
  return frame;
}

/**
 * Splits a byte stream into frames. `push` returns the complete payloads it
 * found (possibly none), or an error string when the stream is not ours to
 * read further. Chunks are kept as they arrive and joined once, when a whole
 * frame is there: a 64 MiB frame arriving in 64 KiB reads is copied once,
 * not once per read.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Bytes copied to join chunks so far (each byte at most once). */
  bytesCopied = 0;

  push(chunk: Buffer): { frames: Buffer[]; error?: string } {
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const frames: Buffer[] = [];
    while (this.buffered >= headerBytes) {
      const length = this.peekLength();
      if (length > frameBytesMax) return { frames, error: `frame of ${length} bytes is over the ${frameBytesMax}-byte limit` };
      if (this.buffered < headerBytes + length) break;
      frames.push(this.take(headerBytes + length).subarray(headerBytes));
    }
    return { frames };
  }

  /** The big-endian length prefix, which may straddle chunks. */
  private peekLength(): number {
    const first = this.chunks[0]!;
    if (first.length >= headerBytes) return first.readUInt32BE(0);
    let value = 0;
    let got = 0;
    for (const c of this.chunks) {
      for (let i = 0; i < c.length && got < headerBytes; i++, got++) value = value * 256 + c[i]!;
      if (got === headerBytes) break;
    }
    return value;
  }

  /** Removes and returns the next n buffered bytes (a view when they sit in one chunk). */
  private take(n: number): Buffer {
    this.buffered -= n;
    const first = this.chunks[0]!;
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - at);
      out.set(k === c.length ? c : c.subarray(0, k), at);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.bytesCopied += n;
    return out;
  }
}

class TcpPeerLink extends BatchingLink<net.Socket> {
  protected open(): net.Socket {
    const { host, port } = splitAddress(this.address);
    const socket = net.connect({ host, port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 10_000 });
    socket.on('data', () => {});
    socket.on('error', (err) => this.broken(socket, err));
    socket.on('close', () => this.broken(socket, undefined));
    socket.on('drain', () => this.drained());
    return socket;
  }

  protected write(socket: net.Socket, batch: raftpb.RaftBatch): boolean {
    const ok = socket.write(encodeFrame(batch));
    // Node buffers what the kernel does not take yet; past a bound, stop adding until it drains.
    return ok || socket.writableLength < socketBufferBytesMax;
  }

  protected destroy(socket: net.Socket): void {
    socket.destroy();
  }
}

/** The TCP peer transport: one socket per link, one frame per batch. */
export class TcpPeerTransport extends LinkedPeerTransport {
  constructor(opts: PeerTransportOptions) {
    super(opts, (peer, address) => new TcpPeerLink(peer, address, opts));
  }
}

/** The receiving half: accepts peers' connections, decodes their frames and hands each message on. */
export class TcpPeerServer {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly intake: PeerIntake;
  private readonly refusals: RefusalLog;

  /** `checks`: which senders are taken, and where refusals are counted (see PeerIntake); without them every sender is taken. */
  constructor(cellId: string, onMessage: (m: Message) => void, logger: Logger, checks: Pick<PeerIntake, 'admits' | 'onRefused'> = {}) {
    this.intake = { cellId, onMessage, ...checks };
    this.refusals = new RefusalLog(logger);
    this.server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
  }

  listen(address: string): Promise<void> {
    const { host, port } = splitAddress(address);
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  get port(): number {
    const a = this.server.address();
    return typeof a === 'object' && a !== null ? a.port : 0;
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    const reader = new FrameReader();
    const refuse = (reason: string): void => {
      this.refusals.warn({ remote: `${socket.remoteAddress}:${socket.remotePort}`, reason }, 'closing a peer connection');
      socket.destroy();
    };
    socket.on('data', (chunk: Buffer) => {
      const { frames, error } = reader.push(chunk);
      for (const payload of frames) {
        let batch: raftpb.RaftBatch;
        try {
          batch = raftpb.RaftBatch.decode(payload);
        } catch (err) {
          this.intake.onRefused?.(StreamRefusal.Undecodable);
          return refuse(`a frame is not a RaftBatch: ${(err as Error).message}`);
        }
        const refused = takeBatch(batch, this.intake);
        if (refused !== undefined) return refuse(refused);
      }
      if (error !== undefined) {
        this.intake.onRefused?.(StreamRefusal.FrameTooLarge);
        refuse(error);
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => this.sockets.delete(socket));
  }
}
