/**
 * The addresses a client may call (a cell's nodes today, routers later) and
 * which one it prefers: the last known leader. Leader hints move the
 * preference; a failure moves it to the next address in turn. Unary calls,
 * the KeepAlive stream and watches share one pool, so a hint learned by any
 * of them helps all.
 */
import { assert } from '@fencer/base';
import { credentials, type ChannelCredentials } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { CLIENT_LIMITS } from './limits.js';

export type LockServiceStub = InstanceType<typeof lockservice.LockServiceClient>;

/** host:port with a non-empty host and a port in range. */
const ADDRESS = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/;

export function checkAddress(address: string): string {
  const a = address.trim();
  const m = ADDRESS.exec(a);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535)
    throw new RangeError(`"${address}" is not an endpoint: use host:port, e.g. 127.0.0.1:7001`);
  return a;
}

export class EndpointPool {
  private readonly addresses: string[];
  private preferred = 0;
  private readonly stubs = new Map<string, LockServiceStub>();
  private closed = false;

  constructor(
    addresses: readonly string[],
    private readonly channelCredentials: ChannelCredentials = credentials.createInsecure(),
  ) {
    assert(addresses.length > 0, 'a client needs at least one endpoint');
    assert(addresses.length <= CLIENT_LIMITS.endpointsMax, `at most ${CLIENT_LIMITS.endpointsMax} endpoints`);
    this.addresses = [...new Set(addresses.map(checkAddress))];
  }

  /** The address to call now. */
  current(): string {
    return this.addresses[this.preferred] as string;
  }

  list(): readonly string[] {
    return this.addresses;
  }

  /** A node said the leader is at `hint`: prefer it (learning it if new, while room is left). */
  noteLeader(hint: string): void {
    let at = this.addresses.indexOf(hint);
    if (at < 0) {
      try {
        checkAddress(hint);
      } catch {
        return; // a malformed hint is ignored; the rotation still finds the leader
      }
      if (this.addresses.length >= CLIENT_LIMITS.endpointsMax) return;
      this.addresses.push(hint);
      at = this.addresses.length - 1;
    }
    this.preferred = at;
  }

  /** The call to `failed` did not work: move on to the next address, unless another caller already did. */
  advance(failed: string): void {
    if (this.current() !== failed) return;
    this.preferred = (this.preferred + 1) % this.addresses.length;
  }

  stub(address: string): LockServiceStub {
    assert(!this.closed, 'the client is closed');
    let s = this.stubs.get(address);
    if (!s) {
      s = new lockservice.LockServiceClient(address, this.channelCredentials, {
        // Fail fast on a dead address instead of queueing calls behind a long reconnect backoff.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1_000,
        // Per-call introspection bookkeeping nobody reads here.
        'grpc.enable_channelz': 0,
        // grpc-js keeps a stream's written messages for its own retries and copies the unsent rest of that buffer
        // on every completed write: a KeepAlive stream writing thousands of heartbeats at once went quadratic.
        // This client retries by itself, so grpc-js keeps nothing.
        'grpc.per_rpc_retry_buffer_size': 0,
      });
      this.stubs.set(address, s);
    }
    return s;
  }

  close(): void {
    this.closed = true;
    for (const s of this.stubs.values()) s.close();
    this.stubs.clear();
  }
}
