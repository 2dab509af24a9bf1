/**
 * The gRPC peer transport (`--peer-transport grpc`): one long-lived
 * RaftTransport.Send stream per directed link, each message one RaftBatch,
 * with the batching, bounds and reconnects of every link (batching-link.ts).
 * The server half refuses what the intake check refuses (intake.ts) by
 * ending the call with a status that says why.
 */
import { credentials, type ClientDuplexStream, type ServerDuplexStream, status, type ServiceError } from '@grpc/grpc-js';
import type { NodeId } from '@fencer/base';
import { raftpb } from '@fencer/protocol';
import type { TlsMaterial } from '@fencer/service';
import { BatchingLink, LinkedPeerTransport, type PeerTransportOptions } from './batching-link.js';
import { type PeerIntake, StreamRefusal, takeBatch } from './intake.js';
import {
  grpcPeerAckBatches,
  grpcPeerKeepaliveTimeoutMs,
  grpcPeerReconnectBackoffMs,
  grpcPeerReconnectBackoffMsMax,
  peerBatchBytesMax,
  peerKeepaliveMs,
} from './limits.js';
import type { PeerLogger } from './logger.js';
import { RefusalLog } from './refusal-log.js';
import { grpcChannelCredentials, replicaOfCell } from './tls-links.js';

type RaftStream = ClientDuplexStream<raftpb.RaftBatch, raftpb.RaftBatchAck>;

class GrpcPeerLink extends BatchingLink<RaftStream> {
  private client: InstanceType<typeof raftpb.RaftTransportClient>;
  /** The TLS material the client's channel was made with: a reload takes effect at the next stream the link opens. */
  private material: TlsMaterial | undefined;

  constructor(peer: NodeId, address: string, opts: PeerTransportOptions) {
    super(peer, address, opts);
    this.client = this.makeClient();
  }

  private makeClient(): InstanceType<typeof raftpb.RaftTransportClient> {
    const files = this.opts.tls;
    this.material = files?.current;
    // With TLS, the link takes a server only when its certificate names a replica of this cell.
    const creds =
      files === undefined
        ? credentials.createInsecure()
        : grpcChannelCredentials(files, this.opts.tlsAccepts ?? replicaOfCell(this.opts.cellId));
    return new raftpb.RaftTransportClient(this.address, creds, {
      'grpc.keepalive_time_ms': peerKeepaliveMs,
      'grpc.keepalive_timeout_ms': grpcPeerKeepaliveTimeoutMs,
      'grpc.initial_reconnect_backoff_ms': grpcPeerReconnectBackoffMs,
      'grpc.max_reconnect_backoff_ms': grpcPeerReconnectBackoffMsMax,
      'grpc.max_send_message_length': peerBatchBytesMax,
    });
  }

  protected open(): RaftStream {
    if (this.opts.tls !== undefined && this.opts.tls.current !== this.material) {
      this.client.close();
      this.client = this.makeClient();
    }
    const stream = this.client.send();
    stream.on('data', () => {});
    stream.on('error', (err: ServiceError) => this.broken(stream, err.code === status.CANCELLED ? undefined : err));
    stream.on('end', () => this.broken(stream, undefined));
    stream.on('drain', () => this.drained());
    return stream;
  }

  /**
   * A stream that ended cleanly, or failed UNAVAILABLE for a dropped or
   * refused connection, was ended by the peer; a keepalive or deadline
   * timeout was not.
   */
  protected override endedByPeer(err: Error | undefined): boolean {
    if (err === undefined) return true;
    const e = err as Partial<ServiceError>;
    if (e.code !== status.UNAVAILABLE) return false;
    return !/timeout|timed out|keepalive|deadline/i.test(e.details ?? err.message);
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
export class GrpcPeerTransport extends LinkedPeerTransport {
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
 * message on (intake.ts takeBatch). A refused batch ends the call with a
 * status (refusalStatus), and nothing the call carries after it is taken.
 * Serve it with `raftTransportService`, whose undecodable messages it refuses.
 */
export function raftTransportHandlers(intake: PeerIntake, logger: PeerLogger): raftpb.RaftTransportServer {
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
        if (batches % grpcPeerAckBatches === 0) call.write({ batches });
      });
      call.on('end', () => {
        if (!refused) call.end();
      });
      call.on('error', () => {});
    },
  };
}
