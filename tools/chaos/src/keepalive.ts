/**
 * One KeepAlive stream per worker process carrying every live session of
 * the process, as the contract suggests. It records, for the checkers, the
 * send time and ttl_ms_remaining of each acknowledged heartbeat (the send
 * time of the earliest one outstanding for that session, which is never
 * later than the one really acknowledged, so the expiry bound derived from
 * it is safe) and the moment the server said a session is gone. A stream
 * that stops answering is abandoned for the next node, as a client must do
 * when its path to the leader is cut.
 */
import type { ClientDuplexStream, ServiceError } from '@grpc/grpc-js';
import { fromServiceError, type lockservice } from '@fencer/protocol';
import { type HistoryWriter, monoNowMs } from './history.js';
import type { Rpc } from './rpc.js';

export interface LiveSession {
  readonly id: string;
  readonly ns: string;
  readonly ttlMs: number;
  /** Set once the server said it is gone, or a call answered SESSION_NOT_FOUND. */
  dead: boolean;
}

export class KeepAliveManager {
  private readonly sessions = new Map<string, { session: LiveSession; outstanding: number[] }>();
  private stream: ClientDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse> | undefined;
  private timer: NodeJS.Timeout | undefined;
  acks = 0;
  streams = 0;

  constructor(
    private readonly rpc: Rpc,
    private readonly history: HistoryWriter,
    private readonly intervalMs: number,
    /** A stream whose oldest unanswered heartbeat is older than this is replaced. */
    private readonly staleMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.beat(), this.intervalMs);
  }

  add(session: LiveSession): void {
    this.sessions.set(session.id, { session, outstanding: [] });
  }

  /** Stops heartbeating a session (closed, or abandoned on purpose). */
  remove(id: string): void {
    this.sessions.delete(id);
  }

  markDead(id: string): void {
    const e = this.sessions.get(id);
    if (e) e.session.dead = true;
    this.sessions.delete(id);
  }

  private open(): ClientDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse> {
    const target = this.rpc.currentTarget;
    const s = this.rpc.client(target).keepAlive();
    this.streams++;
    s.on('data', (r: lockservice.KeepAliveResponse) => {
      // Answers from a replaced stream would be matched with the wrong send times.
      if (this.stream !== s) return;
      const e = this.sessions.get(r.sessionId);
      if (!e) return;
      const sent = e.outstanding.shift();
      if (r.expired) {
        this.history.sessionEnded(r.sessionId);
        this.markDead(r.sessionId);
      } else if (sent !== undefined && r.ttlMsRemaining > 0) {
        // TTL 0: the leader is expiring the session (not yet gone); that is no acknowledgement of life.
        this.acks++;
        this.history.heartbeat(r.sessionId, sent, r.ttlMsRemaining);
      }
    });
    s.on('error', (err: ServiceError) => {
      if (this.stream !== s) return;
      this.drop();
      this.rpc.follow(fromServiceError(err).leaderHint);
    });
    s.on('end', () => {
      if (this.stream === s) this.drop();
    });
    return s;
  }

  private drop(): void {
    const s = this.stream;
    this.stream = undefined;
    for (const e of this.sessions.values()) e.outstanding.length = 0;
    s?.cancel();
  }

  private beat(): void {
    const now = monoNowMs();
    let oldest = Infinity;
    for (const e of this.sessions.values()) if (e.outstanding.length > 0) oldest = Math.min(oldest, e.outstanding[0]!);
    if (this.stream && now - oldest > this.staleMs) {
      this.drop();
      this.rpc.follow(undefined);
    }
    if (this.sessions.size === 0) return;
    this.stream ??= this.open();
    for (const e of this.sessions.values()) {
      if (e.outstanding.length > 8) continue; // the stream is stuck; it will be replaced above
      e.outstanding.push(monoNowMs());
      this.stream.write({ sessionId: e.session.id });
    }
  }

  stop(): void {
    clearInterval(this.timer);
    const s = this.stream;
    this.stream = undefined;
    s?.end();
    s?.cancel();
  }
}
