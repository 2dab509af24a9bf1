/**
 * The peer transport: one long-lived gRPC stream per directed link, carrying
 * batches of Raft messages. Messages handed over in one synchronous run (a
 * ready, or every message of one incoming batch) leave as one batch, in a
 * microtask right after it: not a later turn of the event loop, where the
 * batch would wait behind every other pending I/O callback (client calls,
 * peer batches) before it leaves. Each link has a bounded send queue; when it is
 * full, or the peer is down, messages are dropped — Raft retransmits, and the
 * core is told the peer is unreachable so the leader falls back to probing.
 */
import { credentials, type ClientDuplexStream, type ServerDuplexStream, status, type ServiceError } from '@grpc/grpc-js';
import type { NodeId } from '@fencer/base';
import type { Message } from '@fencer/raft';
import { raftpb } from '@fencer/protocol';
import { messageFromWire, messageToWire } from './peer-codec.js';
import type { Logger } from './logger.js';

export interface PeerTransportOptions {
  readonly selfId: NodeId;
  readonly cellId: string;
  /** Messages queued for one peer before new ones are dropped. */
  readonly sendQueueMax: number;
  /** Delay before reconnecting a broken link. */
  readonly reconnectDelayMs: number;
  readonly logger: Logger;
  readonly onUnreachable: (peer: NodeId) => void;
  readonly onQueueDepth?: (peer: NodeId, depth: number) => void;
  readonly onDropped?: (peer: NodeId, count: number) => void;
}

class PeerLink {
  private client: InstanceType<typeof raftpb.RaftTransportClient>;
  private stream: ClientDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck> | undefined;
  private queue: raftpb.RaftMessage[] = [];
  private flushScheduled = false;
  private blocked = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    readonly peer: NodeId,
    readonly address: string,
    private readonly opts: PeerTransportOptions,
  ) {
    this.client = new raftpb.RaftTransportClient(address, credentials.createInsecure(), {
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 5_000,
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1_000,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
    });
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

  private ensureStream(): ClientDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck> | undefined {
    if (this.stream || this.closed || this.reconnectTimer) return this.stream;
    const stream = this.client.send();
    stream.on('data', () => {});
    stream.on('error', (err: ServiceError) => this.broken(stream, err));
    stream.on('end', () => this.broken(stream, undefined));
    stream.on('drain', () => {
      this.blocked = false;
      this.flush();
    });
    this.stream = stream;
    return stream;
  }

  private broken(stream: ClientDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck>, err: ServiceError | undefined): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    this.blocked = false;
    const dropped = this.queue.length;
    this.queue = [];
    if (dropped > 0) this.opts.onDropped?.(this.peer, dropped);
    if (this.closed) return;
    if (err && err.code !== status.CANCELLED) this.opts.logger.debug({ peer: this.peer, err: err.message }, 'peer link broken');
    this.opts.onUnreachable(this.peer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
    }, this.opts.reconnectDelayMs);
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.blocked || this.queue.length === 0) return;
    const stream = this.ensureStream();
    if (!stream) {
      // Link down and waiting to reconnect: drop, Raft retransmits.
      this.opts.onDropped?.(this.peer, this.queue.length);
      this.queue = [];
      return;
    }
    const messages = this.queue;
    this.queue = [];
    this.opts.onQueueDepth?.(this.peer, 0);
    const ok = stream.write({ cellId: this.opts.cellId, messages });
    if (!ok) this.blocked = true;
  }

  close(): void {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.stream?.cancel();
    this.stream = undefined;
    this.client.close();
  }
}

export class PeerTransport {
  private readonly links = new Map<NodeId, PeerLink>();

  constructor(private readonly opts: PeerTransportOptions) {}

  setPeer(id: NodeId, address: string): void {
    if (id === this.opts.selfId) return;
    const link = this.links.get(id);
    if (link && link.address === address) return;
    link?.close();
    this.links.set(id, new PeerLink(id, address, this.opts));
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

/** The server half: decodes batches from peers of this cell and hands each message on. */
export function raftTransportHandlers(
  cellId: string,
  onMessage: (m: Message) => void,
  logger: Logger,
): raftpb.RaftTransportServer {
  return {
    send(call: ServerDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck>) {
      let batches = 0;
      call.on('data', (batch: raftpb.RaftBatch) => {
        if (batch.cellId !== cellId) {
          logger.warn({ got: batch.cellId, want: cellId }, 'peer batch for another cell: closing the stream');
          call.destroy(new Error(`this node belongs to cell ${cellId}, not ${batch.cellId}`));
          return;
        }
        batches++;
        for (const w of batch.messages) {
          const m = messageFromWire(w);
          if (m) onMessage(m);
        }
        if (batches % 1024 === 0) call.write({ batches });
      });
      call.on('end', () => call.end());
      call.on('error', () => {});
    },
  };
}
