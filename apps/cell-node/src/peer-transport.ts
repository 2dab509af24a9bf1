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
import { type PeerIntake, StreamRefusal, messageToWire, takeBatch } from './peer-codec.js';
import type { Logger } from './logger.js';
import { RefusalLog } from './refusal-log.js';

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
  /** This node's peer address as its cell lists it, sent in the first batch of each connection (RaftBatch.sender_address). */
  readonly selfAddress?: string;
}

/** What the cell node needs of a peer transport (gRPC streams here, TCP frames in tcp-peer-transport.ts). */
export interface RaftPeerTransport {
  setPeer(id: NodeId, address: string): void;
  /** Whether messages to `id` have a link (an address) already. */
  hasPeer(id: NodeId): boolean;
  removePeer(id: NodeId): void;
  send(messages: readonly Message[]): void;
  close(): void;
}

/**
 * One directed link's batching, bounds and reconnect policy, whatever the
 * connection underneath (a gRPC stream here, a TCP socket in
 * tcp-peer-transport.ts). A subclass opens a connection, writes a batch and
 * calls `broken` when the connection ends.
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

type RaftStream = ClientDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck>;

class GrpcPeerLink extends BatchingLink<RaftStream> {
  private readonly client: InstanceType<typeof raftpb.RaftTransportClient>;

  constructor(peer: NodeId, address: string, opts: PeerTransportOptions) {
    super(peer, address, opts);
    this.client = new raftpb.RaftTransportClient(address, credentials.createInsecure(), {
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 5_000,
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1_000,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
    });
  }

  protected open(): RaftStream {
    const stream = this.client.send();
    stream.on('data', () => {});
    stream.on('error', (err: ServiceError) => this.broken(stream, err.code === status.CANCELLED ? undefined : err));
    stream.on('end', () => this.broken(stream, undefined));
    stream.on('drain', () => this.drained());
    return stream;
  }

  protected write(stream: RaftStream, batch: raftpb.RaftBatch): boolean {
    return stream.write(batch);
  }

  protected destroy(stream: RaftStream): void {
    stream.cancel();
  }

  override close(): void {
    super.close();
    this.client.close();
  }
}

/** The gRPC peer transport: one long-lived RaftTransport.Send stream per link. */
export class PeerTransport extends LinkedPeerTransport {
  constructor(opts: PeerTransportOptions) {
    super(opts, (peer, address) => new GrpcPeerLink(peer, address, opts));
  }
}

/** A message of a Send call whose bytes are not a RaftBatch: the decoder's complaint, for the handler to refuse. */
const UNDECODABLE = Symbol('undecodable');
interface UndecodableBatch {
  readonly [UNDECODABLE]: string;
}

/**
 * RaftTransport as the peer port serves it: the generated definition, except
 * that bytes which do not decode reach the handler as a marked value. Left to
 * grpc-js, its deserializer would throw and end the call with INTERNAL,
 * uncounted; the handler instead counts the refusal (undecodable) and answers
 * INVALID_ARGUMENT, as the TCP transport counts it and closes.
 */
export const raftTransportService: raftpb.RaftTransportService = {
  send: {
    ...raftpb.RaftTransportService.send,
    requestDeserialize: (bytes: Buffer): raftpb.RaftBatch => {
      try {
        return raftpb.RaftTransportService.send.requestDeserialize(bytes);
      } catch (err) {
        const marked: UndecodableBatch = { [UNDECODABLE]: (err as Error).message };
        return marked as unknown as raftpb.RaftBatch;
      }
    },
  },
};

/** The status a refused Send call ends with, by refusal; a person reading it on the sending side knows what to fix. */
const refusalStatus: Partial<Record<StreamRefusal, status>> = {
  [StreamRefusal.Undecodable]: status.INVALID_ARGUMENT,
  [StreamRefusal.OtherCell]: status.FAILED_PRECONDITION,
  [StreamRefusal.NotMember]: status.PERMISSION_DENIED,
};

/**
 * The server half: decodes batches from peers of this cell and hands each
 * message on (peer-codec.ts takeBatch). A refused batch ends the call with a
 * status (refusalStatus), and nothing the call carries after it is taken.
 * Serve it with `raftTransportService`, whose undecodable messages it refuses.
 */
export function raftTransportHandlers(intake: PeerIntake, logger: Logger): raftpb.RaftTransportServer {
  const refusals = new RefusalLog(logger);
  return {
    send(call: ServerDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck>) {
      let batches = 0;
      let refused = false;
      // takeBatch says why in words; the last reason it counted picks the status.
      let lastRefusal: StreamRefusal | undefined;
      const callIntake: PeerIntake = {
        ...intake,
        onRefused: (reason) => {
          lastRefusal = reason;
          intake.onRefused?.(reason);
        },
      };
      const refuse = (reason: StreamRefusal, details: string): void => {
        refused = true;
        refusals.warn({ peer: call.getPeer(), reason: details }, 'closing a peer stream');
        // grpc-js ends a server stream with the status of an emitted error; destroy() would end it with none,
        // leaving the call open until the sender gives up.
        call.emit('error', { code: refusalStatus[reason] ?? status.INVALID_ARGUMENT, details });
      };
      call.on('data', (batch: raftpb.RaftBatch | UndecodableBatch) => {
        if (refused) return;
        if (UNDECODABLE in batch) {
          intake.onRefused?.(StreamRefusal.Undecodable);
          refuse(StreamRefusal.Undecodable, `a message is not a RaftBatch: ${batch[UNDECODABLE]}`);
          return;
        }
        lastRefusal = undefined;
        const why = takeBatch(batch, callIntake);
        if (why !== undefined) {
          refuse(lastRefusal ?? StreamRefusal.Undecodable, why);
          return;
        }
        batches++;
        if (batches % 1024 === 0) call.write({ batches });
      });
      call.on('end', () => {
        if (!refused) call.end();
      });
      call.on('error', () => {});
    },
  };
}
