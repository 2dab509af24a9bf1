/**
 * The cells behind a router or proxy: each cell's replica addresses (from
 * the routing table), its last known leader (followed through the
 * `leader-hint` of NOT_LEADER answers), one gRPC channel and one lane
 * (@fencer/peer-transport LaneClient, for unary calls) per address, and the count
 * of calls in flight towards it.
 */
import { type ChannelCredentials, credentials } from '@grpc/grpc-js';
import { internalpb, lockservice } from '@fencer/protocol';
import { LaneClient, anyReplica, grpcChannelCredentials } from '@fencer/peer-transport';
import type { TlsFiles } from '@fencer/service';
import type { RoutingTable } from '@fencer/contract';

export type LockStub = InstanceType<typeof lockservice.LockServiceClient>;
export type InternalStub = InstanceType<typeof internalpb.CellInternalClient>;

const CHANNEL_OPTIONS = {
  // A dead replica must fail fast so the call moves on to the next one.
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1_000,
  'grpc.enable_channelz': 0,
};

export class CellState {
  /** Calls (and watches) this process has open towards the cell. */
  inFlight = 0;
  private leader: string | undefined;
  private next = 0;

  constructor(
    readonly id: string,
    public replicas: readonly string[],
  ) {}

  /** Where to send the next call: the last known leader, else the replicas in turn. */
  target(): string {
    if (this.leader !== undefined) return this.leader;
    return this.replicas[this.next % this.replicas.length]!;
  }

  /** A replica named the leader. A hint outside the cell's replica list is ignored (it would be a stale or foreign address). */
  noteLeader(hint: string | undefined): void {
    if (hint !== undefined && this.replicas.includes(hint)) this.leader = hint;
  }

  /** A call to `failed` did not reach a leader: forget it as leader and move on to the next replica. */
  advance(failed: string): void {
    if (this.leader === failed) this.leader = undefined;
    const at = this.replicas.indexOf(failed);
    this.next = at < 0 ? this.next + 1 : at + 1;
  }

  get knownLeader(): string | undefined {
    return this.leader;
  }
}

export class CellPool {
  private readonly cells = new Map<string, CellState>();
  private readonly lockStubs = new Map<string, LockStub>();
  private readonly internalStubs = new Map<string, InternalStub>();
  private readonly lanes = new Map<string, LaneClient>();

  /** `tls`: reach the cells with mutual TLS, presenting this front end's certificate and taking any replica the CA signed. */
  constructor(private readonly tls?: TlsFiles) {}

  /** A new channel's credentials: with TLS, the certificate current now (a reload reaches channels made after it). */
  private credentials(): ChannelCredentials {
    return this.tls === undefined ? credentials.createInsecure() : grpcChannelCredentials(this.tls, anyReplica);
  }

  /** Follows a new routing table: new cells appear, changed replica lists replace the old ones, a leader not listed any more is forgotten. */
  update(table: RoutingTable): void {
    for (const [id, c] of table.cells) {
      const cell = this.cells.get(id);
      if (!cell) {
        this.cells.set(id, new CellState(id, c.replicas));
      } else if (cell.replicas.join(',') !== c.replicas.join(',')) {
        const leader = cell.knownLeader;
        cell.replicas = c.replicas;
        if (leader !== undefined && !c.replicas.includes(leader)) cell.advance(leader);
      }
    }
  }

  cell(id: string): CellState | undefined {
    return this.cells.get(id);
  }

  all(): IterableIterator<CellState> {
    return this.cells.values();
  }

  lockStub(address: string): LockStub {
    let s = this.lockStubs.get(address);
    if (!s) {
      s = new lockservice.LockServiceClient(address, this.credentials(), CHANNEL_OPTIONS);
      this.lockStubs.set(address, s);
    }
    return s;
  }

  internalStub(address: string): InternalStub {
    let s = this.internalStubs.get(address);
    if (!s) {
      s = new internalpb.CellInternalClient(address, this.credentials(), CHANNEL_OPTIONS);
      this.internalStubs.set(address, s);
    }
    return s;
  }

  lane(address: string): LaneClient {
    let l = this.lanes.get(address);
    if (!l) {
      l = new LaneClient(address, this.tls === undefined ? undefined : { files: this.tls, accepts: anyReplica });
      this.lanes.set(address, l);
    }
    return l;
  }

  close(): void {
    for (const l of this.lanes.values()) l.close();
    this.lanes.clear();
    for (const s of this.lockStubs.values()) s.close();
    for (const s of this.internalStubs.values()) s.close();
    this.lockStubs.clear();
    this.internalStubs.clear();
  }
}
