/**
 * The TCP peer transport: one plain TCP connection per directed link
 * carrying length-prefixed frames, each frame one `fencer.raft.v1.RaftBatch`
 * (the same protobuf message the gRPC transport streams). It exists because
 * the peer path is the cell's hottest: every log write is one batch to each
 * follower and one answer back, and a gRPC stream message costs more CPU
 * than a frame on a socket (HTTP/2 framing, grpc-js filters and stream
 * machinery); see docs/benchmarks.md, cell section.
 *
 * Frame: a 4-byte big-endian payload length, then the payload (read by
 * the one length-prefix decoder, length-prefix.ts). A receiver closes a
 * connection that sends a frame longer than `peerBatchBytesMax`, a payload
 * that is not a RaftBatch, a batch for another cell, or a message from a
 * sender it does not take (intake.ts takeBatch), counts the refusal by
 * reason and says why in its log (one warning per window at most,
 * refusal-log.ts). Batching, queue bounds and dropping are those of every
 * link (batching-link.ts): messages handed over in one synchronous run
 * leave as one frame in a microtask after it; a link with a full queue, a
 * full socket buffer or no connection drops messages (Raft retransmits) and
 * reports the peer unreachable so the leader falls back to probing.
 */
import net from 'node:net';
import type tls from 'node:tls';
import { raftpb } from '@fencer/protocol';
import type { TlsFiles } from '@fencer/service';
import type { Message } from '@fencer/raft';
import { splitAddress } from './address.js';
import { BatchingLink, LinkedPeerTransport, type PeerTransportOptions } from './batching-link.js';
import { type PeerIntake, StreamRefusal, takeBatch } from './intake.js';
import { LengthPrefixDecoder } from './length-prefix.js';
import { peerBatchBytesMax, peerKeepaliveMs, peerSocketBufferBytesMax } from './limits.js';
import type { PeerLogger } from './logger.js';
import { RefusalLog } from './refusal-log.js';
import { ALPN, type AcceptsIdentity, createTlsListener, dialTls, replicaOfCell } from './tls-links.js';

/** A frame's header: the payload's length, big-endian. */
export const peerFrameHeaderBytes = 4;

/** Encodes one batch as a frame: length prefix and protobuf payload in one buffer (one write, one syscall). */
export function encodePeerFrame(batch: raftpb.RaftBatch): Buffer {
  const payload = raftpb.RaftBatch.encode(batch).finish();
  const frame = Buffer.allocUnsafe(peerFrameHeaderBytes + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  frame.set(payload, peerFrameHeaderBytes);
  return frame;
}

/** A decoder of one peer connection's frames (length-prefix.ts); each frame's payload is one RaftBatch. */
export function peerFrameDecoder(): LengthPrefixDecoder {
  return new LengthPrefixDecoder({ headerBytes: peerFrameHeaderBytes, payloadBytesMax: peerBatchBytesMax, name: 'frame' });
}

class TcpPeerLink extends BatchingLink<net.Socket> {
  protected open(): net.Socket {
    const { host, port } = splitAddress(this.address);
    const tlsFiles = this.opts.tls;
    // With TLS, the link takes a server only when its certificate names a replica of this cell.
    const socket =
      tlsFiles === undefined
        ? net.connect({ host, port, noDelay: true, keepAlive: true, keepAliveInitialDelay: peerKeepaliveMs })
        : dialTls(this.address, tlsFiles, [ALPN.peer], this.opts.tlsAccepts ?? replicaOfCell(this.opts.cellId));
    if (tlsFiles !== undefined) {
      socket.setNoDelay(true);
      socket.setKeepAlive(true, peerKeepaliveMs);
    }
    socket.on('data', () => {});
    socket.on('error', (err) => this.broken(socket, err));
    socket.on('close', () => this.broken(socket, undefined));
    socket.on('drain', () => this.drained());
    return socket;
  }

  protected write(socket: net.Socket, batch: raftpb.RaftBatch): boolean {
    const ok = socket.write(encodePeerFrame(batch));
    // Node buffers what the kernel does not take yet; past a bound, stop adding until it drains.
    return ok || socket.writableLength < peerSocketBufferBytesMax;
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

/** What a peer port checks besides the frames: which senders it takes, where refusals are counted, and its TLS files. */
export type PeerServerChecks = Pick<PeerIntake, 'admits' | 'onRefused' | 'onSenderAddress'> & {
  /** Mutual TLS: only connections whose certificate names a replica of this cell are read at all. */
  readonly tls?: TlsFiles;
  /** Whom the port takes under TLS; default: a replica of its cell (the meta group: a control plane). */
  readonly tlsAccepts?: AcceptsIdentity;
};

/** The receiving half: accepts peers' connections, decodes their frames and hands each message on. */
export class TcpPeerServer {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly intake: PeerIntake;
  private readonly refusals: RefusalLog;
  private stopFollowing: () => void = () => {};

  /** `checks`: which senders are taken, and where refusals are counted (see PeerIntake); without them every sender is taken. */
  constructor(cellId: string, onMessage: (m: Message) => void, logger: PeerLogger, checks: PeerServerChecks = {}) {
    const { tls: tlsFiles, tlsAccepts, ...intakeChecks } = checks;
    this.intake = { cellId, onMessage, ...intakeChecks };
    this.refusals = new RefusalLog(logger);
    if (tlsFiles === undefined) {
      this.server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
      return;
    }
    const listener = createTlsListener({
      files: tlsFiles,
      alpn: [ALPN.peer],
      accepts: tlsAccepts ?? replicaOfCell(cellId),
      onConnection: (socket: tls.TLSSocket) => {
        socket.setNoDelay(true);
        this.accept(socket);
      },
      onRefused: (reason, detail, remote) => {
        this.intake.onRefused?.(reason === 'tls-handshake' ? StreamRefusal.TlsHandshake : StreamRefusal.ForeignCertificate);
        this.refusals.warn({ remote, reason: detail }, 'refusing a peer connection');
      },
    });
    this.server = listener.server;
    this.stopFollowing = listener.stopFollowing;
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
    this.stopFollowing();
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    const decoder = peerFrameDecoder();
    const refuse = (reason: string): void => {
      this.refusals.warn({ remote: `${socket.remoteAddress}:${socket.remotePort}`, reason }, 'closing a peer connection');
      socket.destroy();
    };
    socket.on('data', (chunk: Buffer) => {
      const { frames, error } = decoder.push(chunk);
      // The frames before a broken header are whole: each is taken or refused as it would be alone.
      for (const frame of frames) {
        const refused = this.takeFrame(frame.subarray(peerFrameHeaderBytes));
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

  /** Hands on one frame's batch (intake.ts takeBatch); returns why the connection must close instead, if it must. */
  private takeFrame(payload: Buffer): string | undefined {
    let batch: raftpb.RaftBatch;
    try {
      batch = raftpb.RaftBatch.decode(payload);
    } catch (err) {
      this.intake.onRefused?.(StreamRefusal.Undecodable);
      return `a frame is not a RaftBatch: ${(err as Error).message}`;
    }
    return takeBatch(batch, this.intake);
  }
}
