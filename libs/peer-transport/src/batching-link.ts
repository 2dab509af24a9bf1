/**
 * What a Raft peer transport is, and the part its two kinds share: one
 * directed link per peer, carrying batches of Raft messages. Messages handed
 * over in one synchronous run (a ready, or every message of one incoming
 * batch) leave as one batch, in a microtask right after it: not a later turn
 * of the event loop, where the batch would wait behind every other pending
 * I/O callback (client calls, peer batches) before it leaves. Each link has
 * a bounded send queue; when it is full, or the peer is down, messages are
 * dropped (Raft retransmits), and the core is told the peer is unreachable
 * so the leader falls back to probing.
 */
import type { NodeId } from '@fencer/base';
import type { Message } from '@fencer/raft';
import type { raftpb } from '@fencer/protocol';
import type { TlsFiles } from '@fencer/service';
import type { AcceptsIdentity } from './tls-links.js';
import { messageToWire } from './peer-codec.js';
import type { PeerLogger } from './logger.js';

export interface PeerTransportOptions {
  readonly selfId: NodeId;
  readonly cellId: string;
  /** Messages queued for one peer before new ones are dropped. */
  readonly sendQueueMax: number;
  /** Delay before reconnecting a broken link. */
  readonly reconnectDelayMs: number;
  readonly logger: PeerLogger;
  readonly onUnreachable: (peer: NodeId) => void;
  /**
   * The connection to `peer` was closed or reset by its side (not timed
   * out): its process most likely died. The replica's reportConnectionLost
   * (docs/decisions/0021-crash-detection-by-the-transport.md).
   */
  readonly onConnectionLost?: (peer: NodeId) => void;
  readonly onQueueDepth?: (peer: NodeId, depth: number) => void;
  readonly onDropped?: (peer: NodeId, count: number) => void;
  /** This node's peer address as its cell lists it, sent in the first batch of each connection (RaftBatch.sender_address). */
  readonly selfAddress?: string;
  /** Mutual TLS: each link dials with this node's certificate and takes a server naming a replica of its cell only. */
  readonly tls?: TlsFiles;
  /** Whom a link takes as the server under TLS; default: a replica of `cellId` (the meta group: a control plane). */
  readonly tlsAccepts?: AcceptsIdentity;
}

/** What a node needs of a peer transport (TCP frames in tcp-peer-transport.ts, gRPC streams in grpc-peer-transport.ts). */
export interface RaftPeerTransport {
  setPeer(id: NodeId, address: string): void;
  /** Whether messages to `id` have a link (an address) already. */
  hasPeer(id: NodeId): boolean;
  removePeer(id: NodeId): void;
  send(messages: readonly Message[]): void;
  close(): void;
}

/**
 * Error codes of a connection that the other side closed or reset, or whose
 * port nobody listens on any more: what a dead process leaves. A timeout
 * (ETIMEDOUT, a keepalive that went unanswered) or an unreachable host is
 * not among them: it may be a partition, which only the election timer may
 * judge.
 */
const closedByPeerCodes: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ECONNABORTED']);

/** Whether a connection that ended with `err` (undefined: a clean close) was closed by the peer's side. */
export function closedByPeer(err: Error | undefined): boolean {
  if (err === undefined) return true;
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' && closedByPeerCodes.has(code);
}

/**
 * One directed link's batching, bounds and reconnect policy, whatever the
 * connection underneath (a TCP socket in tcp-peer-transport.ts, a gRPC
 * stream in grpc-peer-transport.ts). A subclass opens a connection, writes
 * a batch and calls `broken` when the connection ends.
 */
export abstract class BatchingLink<C> {
  private connection: C | undefined;
  private queue: raftpb.RaftMessage[] = [];
  private flushScheduled = false;
  private blocked = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The connection whose first batch carried this node's address. */
  private addressedOn: C | undefined;

  constructor(
    readonly peer: NodeId,
    readonly address: string,
    protected readonly opts: PeerTransportOptions,
  ) {}

  /** Opens a connection to the peer; it reports its end through `broken`. */
  protected abstract open(): C;
  /** Writes one batch; false when the connection wants no more until `drained`. */
  protected abstract write(connection: C, batch: raftpb.RaftBatch): boolean;
  protected abstract destroy(connection: C): void;
  /** Whether the connection's end was the peer's doing (a close or reset), not a timeout. */
  protected endedByPeer(err: Error | undefined): boolean {
    return closedByPeer(err);
  }

  enqueue(message: Message): void {
    if (this.closed) return;
    if (this.queue.length >= this.opts.sendQueueMax) {
      this.opts.onDropped?.(this.peer, 1);
      this.opts.onUnreachable(this.peer);
      return;
    }
    this.queue.push(messageToWire(message));
    this.opts.onQueueDepth?.(this.peer, this.queue.length);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  protected drained(): void {
    this.blocked = false;
    this.flush();
  }

  protected broken(connection: C, err: Error | undefined): void {
    if (this.connection !== connection) return;
    this.connection = undefined;
    this.blocked = false;
    this.destroy(connection);
    const dropped = this.queue.length;
    this.queue = [];
    if (dropped > 0) this.opts.onDropped?.(this.peer, dropped);
    if (this.closed) return;
    if (err) this.opts.logger.debug({ peer: this.peer, address: this.address, err: err.message }, 'peer link broken');
    this.opts.onUnreachable(this.peer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
    }, this.opts.reconnectDelayMs);
    // Last, with the link in its reconnect wait: what the replica sends in answer is dropped (Raft retransmits).
    if (this.endedByPeer(err)) this.opts.onConnectionLost?.(this.peer);
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.blocked || this.queue.length === 0) return;
    if (this.connection === undefined && !this.closed && this.reconnectTimer === undefined) this.connection = this.open();
    const connection = this.connection;
    if (connection === undefined) {
      // Link down and waiting to reconnect: drop, Raft retransmits.
      this.opts.onDropped?.(this.peer, this.queue.length);
      this.queue = [];
      return;
    }
    const messages = this.queue;
    this.queue = [];
    this.opts.onQueueDepth?.(this.peer, 0);
    // This node's address rides on the first batch of each connection only (a refusal closes the connection,
    // so the next one carries it again).
    const senderAddress = this.addressedOn === connection ? '' : (this.opts.selfAddress ?? '');
    this.addressedOn = connection;
    if (!this.write(connection, { cellId: this.opts.cellId, messages, senderAddress })) this.blocked = true;
  }

  close(): void {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.connection !== undefined) this.destroy(this.connection);
    this.connection = undefined;
  }
}

/** A transport of one link per peer, made by `makeLink`. */
export class LinkedPeerTransport implements RaftPeerTransport {
  private readonly links = new Map<NodeId, BatchingLink<unknown>>();

  constructor(
    protected readonly opts: PeerTransportOptions,
    private readonly makeLink: (peer: NodeId, address: string) => BatchingLink<unknown>,
  ) {}

  setPeer(id: NodeId, address: string): void {
    if (id === this.opts.selfId) return;
    const link = this.links.get(id);
    if (link && link.address === address) return;
    link?.close();
    this.links.set(id, this.makeLink(id, address));
  }

  hasPeer(id: NodeId): boolean {
    return this.links.has(id);
  }

  removePeer(id: NodeId): void {
    this.links.get(id)?.close();
    this.links.delete(id);
  }

  send(messages: readonly Message[]): void {
    for (const m of messages) {
      const link = this.links.get(m.to);
      if (link) link.enqueue(m);
      else this.opts.onUnreachable(m.to);
    }
  }

  close(): void {
    for (const link of this.links.values()) link.close();
    this.links.clear();
  }
}
