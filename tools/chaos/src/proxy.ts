/**
 * A fault-injecting TCP proxy for one directed link (a peer link i→j, or a
 * client process's link to one node), controlled from the harness.
 *
 * Faults, per direction of the link ("up" is from the dialling side to the
 * target, "down" the answers):
 * - cut: bytes are swallowed, silently, as a partition does (no RST: the
 *   endpoints find out by their own timeouts). A direction that lost bytes
 *   is poisoned: it never carries data again, because its byte stream
 *   (HTTP/2 frames) has a hole; the heal resets the connection.
 * - delay with jitter: chunks are held back delayMs + [0, jitterMs), in order.
 * - drop: each chunk resets its connection with probability dropRate. TCP
 *   never loses bytes inside a connection, so loss at this layer shows up as
 *   broken connections (and the retransmission delays are the delay fault).
 * New connections made during a cut are accepted and swallowed too.
 */
import net from 'node:net';
import { assert, type Random } from '@fencer/base';
import { PROXY_CONNECTIONS_MAX, PROXY_DELAYED_BYTES_MAX, PROXY_DELAY_MS_MAX } from './limits.js';

export interface LinkFault {
  /** Swallow what the dialling side sends. */
  readonly cutUp?: boolean;
  /** Swallow what the target answers. */
  readonly cutDown?: boolean;
  readonly delayMs?: number;
  readonly jitterMs?: number;
  /** Probability in [0, 1] that a chunk resets its connection. */
  readonly dropRate?: number;
}

export const HEALED: LinkFault = {};

interface Direction {
  readonly from: net.Socket;
  readonly to: net.Socket;
  /** Lost bytes: this direction of the connection never carries data again (its byte stream has a hole). */
  poisoned: boolean;
  /** Time the last delayed chunk leaves: later chunks never overtake it. */
  lastDueMs: number;
  delayedBytes: number;
  /** Chunks held back, in arrival order; one timer drains them (timers of equal due time may fire in any order). */
  readonly queue: Array<{ readonly chunk: Buffer; readonly dueMs: number }>;
  timer: NodeJS.Timeout | undefined;
}

interface Conn {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  readonly up: Direction;
  readonly down: Direction;
  closed: boolean;
}

export interface ProxyStats {
  connections: number;
  bytesUp: number;
  bytesDown: number;
  swallowedChunks: number;
  /** Connections ended: by a fault, a heal, or either side closing. */
  closes: number;
}

export class LinkProxy {
  private server: net.Server | undefined;
  private readonly conns = new Set<Conn>();
  private fault: LinkFault = HEALED;
  private listenPort = 0;
  readonly stats: ProxyStats = { connections: 0, bytesUp: 0, bytesDown: 0, swallowedChunks: 0, closes: 0 };

  constructor(
    readonly name: string,
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly random: Random,
  ) {
    assert(targetPort > 0 && targetPort < 65536, `target port of ${name}`);
  }

  /** Listens on 127.0.0.1 (port 0 = any free port); resolves with the port. */
  start(port = 0): Promise<number> {
    assert(this.server === undefined, `${this.name} started twice`);
    const server = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
    server.maxConnections = PROXY_CONNECTIONS_MAX;
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.removeListener('error', reject);
        this.listenPort = (server.address() as net.AddressInfo).port;
        resolve(this.listenPort);
      });
    });
  }

  get port(): number {
    return this.listenPort;
  }

  get address(): string {
    return `127.0.0.1:${this.listenPort}`;
  }

  get current(): LinkFault {
    return this.fault;
  }

  /** Applies a fault (replacing the previous one). A cut poisons every connection open now. */
  setFault(fault: LinkFault): void {
    const delayMs = fault.delayMs ?? 0;
    const jitterMs = fault.jitterMs ?? 0;
    const dropRate = fault.dropRate ?? 0;
    assert(
      delayMs >= 0 && jitterMs >= 0 && delayMs + jitterMs <= PROXY_DELAY_MS_MAX,
      `${this.name}: delay within [0, ${PROXY_DELAY_MS_MAX}] ms`,
    );
    assert(dropRate >= 0 && dropRate <= 1, `${this.name}: drop rate is a probability`);
    this.fault = fault;
    for (const c of this.conns) {
      if (fault.cutUp) c.up.poisoned = true;
      if (fault.cutDown) c.down.poisoned = true;
    }
  }

  /** Lifts every fault; connections that lost bytes are reset so the endpoints reconnect cleanly. */
  heal(): void {
    this.fault = HEALED;
    for (const c of this.conns) if (c.up.poisoned || c.down.poisoned) this.reset(c);
  }

  /** Resets every connection now (a crash of the network path), fault or not. */
  resetAll(): void {
    for (const c of this.conns) this.reset(c);
  }

  close(): Promise<void> {
    for (const c of this.conns) this.reset(c);
    const server = this.server;
    this.server = undefined;
    if (!server) return Promise.resolve();
    return new Promise((resolve) => server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    this.stats.connections++;
    const upstream = net.connect({ host: this.targetHost, port: this.targetPort, noDelay: true });
    const conn: Conn = {
      client,
      upstream,
      up: { from: client, to: upstream, poisoned: Boolean(this.fault.cutUp), lastDueMs: 0, delayedBytes: 0, queue: [], timer: undefined },
      down: {
        from: upstream,
        to: client,
        poisoned: Boolean(this.fault.cutDown),
        lastDueMs: 0,
        delayedBytes: 0,
        queue: [],
        timer: undefined,
      },
      closed: false,
    };
    this.conns.add(conn);
    const end = (): void => this.reset(conn);
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (chunk: Buffer) => this.carry(conn, conn.up, chunk, true));
    upstream.on('data', (chunk: Buffer) => this.carry(conn, conn.down, chunk, false));
  }

  private carry(conn: Conn, dir: Direction, chunk: Buffer, isUp: boolean): void {
    if (conn.closed) return;
    const f = this.fault;
    if (isUp ? f.cutUp : f.cutDown) dir.poisoned = true;
    if (dir.poisoned) {
      this.stats.swallowedChunks++;
      return;
    }
    if ((f.dropRate ?? 0) > 0 && this.random.chance(f.dropRate!)) {
      this.reset(conn);
      return;
    }
    if (isUp) this.stats.bytesUp += chunk.length;
    else this.stats.bytesDown += chunk.length;
    const delayMs = (f.delayMs ?? 0) + ((f.jitterMs ?? 0) > 0 ? this.random.float() * f.jitterMs! : 0);
    const now = performance.now();
    if (delayMs <= 0 && dir.delayedBytes === 0) {
      dir.to.write(chunk);
      return;
    }
    if (dir.delayedBytes + chunk.length > PROXY_DELAYED_BYTES_MAX) {
      this.reset(conn);
      return;
    }
    // In order: a chunk never leaves before the one ahead of it.
    const dueMs = Math.max(now + delayMs, dir.lastDueMs);
    dir.lastDueMs = dueMs;
    dir.delayedBytes += chunk.length;
    dir.queue.push({ chunk, dueMs });
    if (dir.timer === undefined) this.drainLater(conn, dir);
  }

  /** Writes every queued chunk that is due, in order, then waits for the next one. */
  private drainLater(conn: Conn, dir: Direction): void {
    const head = dir.queue[0];
    if (head === undefined || conn.closed) {
      dir.timer = undefined;
      return;
    }
    dir.timer = setTimeout(
      () => {
        const now = performance.now();
        while (dir.queue.length > 0 && dir.queue[0]!.dueMs <= now + 1) {
          const { chunk } = dir.queue.shift()!;
          dir.delayedBytes -= chunk.length;
          if (!conn.closed) dir.to.write(chunk);
        }
        this.drainLater(conn, dir);
      },
      Math.max(0, head.dueMs - performance.now()),
    );
  }

  private reset(conn: Conn): void {
    if (conn.closed) return;
    conn.closed = true;
    this.stats.closes++;
    for (const dir of [conn.up, conn.down]) {
      clearTimeout(dir.timer);
      dir.timer = undefined;
      dir.queue.length = 0;
    }
    this.conns.delete(conn);
    for (const s of [conn.client, conn.upstream]) {
      try {
        s.resetAndDestroy();
      } catch {
        s.destroy();
      }
    }
  }
}
