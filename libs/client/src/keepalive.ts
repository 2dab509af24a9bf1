/**
 * The one KeepAlive stream of a client, carrying the heartbeats of all its
 * sessions. Each session has at most one heartbeat in flight, so every answer
 * is matched to the exact instant its heartbeat was sent — the instant the
 * local lease is measured from (lease.ts).
 *
 * A single timer drives everything: due heartbeats (every TTL/3), lease
 * deadlines and grace ends, heartbeats stuck longer than their timeout (a
 * paused node: reconnect elsewhere), and reconnect backoff. A stream that
 * fails moves to the leader hint it carried, or to the next endpoint, after a
 * jittered backoff; every session then heartbeats again at once.
 */
import { assert, FencerError } from '@fencer/base';
import { type ClientDuplexStream, Metadata } from '@grpc/grpc-js';
import type { lockservice } from '@fencer/protocol';
import { CLIENT_LIMITS, heartbeatIntervalMs, heartbeatTimeoutMs } from './limits.js';
import { backoffMs, toFencerError, type CallContext } from './retry.js';
import type { TimerHandle } from './scheduler.js';
import type { Session } from './session.js';

type Stream = ClientDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>;

export interface KeepAliveObserver {
  /** A heartbeat left for a session (tests count them). */
  onHeartbeatSent?(sessionId: string, address: string): void;
  /** A heartbeat's answer was applied to its session's lease. */
  onHeartbeatAnswered?(sessionId: string, answer: lockservice.KeepAliveResponse): void;
  /** The stream failed and will reconnect. */
  onStreamFailed?(address: string, error: FencerError): void;
}

export class KeepAlive {
  private readonly sessions = new Map<string, Session>();
  private stream: Stream | undefined;
  private streamAddress = '';
  private timer: TimerHandle | undefined;
  private reconnectAtMonoMs = 0;
  private reconnectAttempt = 0;
  private hintHops = 0;
  private closed = false;
  private processing = false;
  private processAgain = false;

  constructor(
    private readonly ctx: CallContext,
    private readonly observer: KeepAliveObserver = {},
  ) {}

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Address of the node the stream is open to, if any. */
  get address(): string | undefined {
    return this.stream ? this.streamAddress : undefined;
  }

  add(session: Session): void {
    assert(!this.closed, 'the client is closed');
    assert(!this.sessions.has(session.id), `session ${session.id} is registered once`);
    this.sessions.set(session.id, session);
    this.process();
  }

  remove(session: Session): void {
    this.sessions.delete(session.id);
    this.process();
  }

  close(): void {
    this.closed = true;
    this.sessions.clear();
    this.dropStream();
    if (this.timer) this.ctx.scheduler.clearTimer(this.timer);
    this.timer = undefined;
  }

  /** Runs the state machine now: lease transitions, stuck heartbeats, (re)connects, due heartbeats, the next wake-up. */
  process(): void {
    if (this.processing) {
      // Re-entered from an event handler (a listener of 'expired' acquiring again, say): run once more after this run.
      this.processAgain = true;
      return;
    }
    this.processing = true;
    try {
      for (let i = 0; i < 8; i++) {
        this.processAgain = false;
        this.processOnce();
        if (!this.processAgain) break;
      }
    } finally {
      this.processing = false;
    }
  }

  private processOnce(): void {
    const { scheduler } = this.ctx;
    if (this.timer) scheduler.clearTimer(this.timer);
    this.timer = undefined;
    if (this.closed) return;
    const now = scheduler.monoMs();
    let stuck = false;
    for (const s of [...this.sessions.values()]) {
      for (let i = 0; i < 3; i++) {
        const t = s.lease.tick(now);
        if (!t) break;
        s.applyTransition(t);
      }
      if (s.state === 'expired' || s.closed) {
        this.sessions.delete(s.id);
        continue;
      }
      if (s.inFlightSentMonoMs !== undefined && now - s.inFlightSentMonoMs >= heartbeatTimeoutMs(s.ttlMs)) stuck = true;
    }
    if (stuck && this.stream)
      this.recordFailure(new FencerError('DEADLINE_EXCEEDED', `a heartbeat to ${this.streamAddress} went unanswered`));
    if (this.sessions.size === 0) {
      this.dropStream();
      return;
    }
    if (!this.stream && now >= this.reconnectAtMonoMs) this.openStream();
    if (this.stream) {
      for (const s of this.sessions.values()) {
        if (s.inFlightSentMonoMs === undefined && now >= s.nextBeatMonoMs) this.send(s, now);
      }
    }
    // Next wake-up: the earliest instant anything above could change.
    let next = Number.POSITIVE_INFINITY;
    for (const s of this.sessions.values()) {
      const check = s.lease.nextCheckMonoMs();
      if (check !== undefined) next = Math.min(next, check);
      if (s.inFlightSentMonoMs !== undefined) next = Math.min(next, s.inFlightSentMonoMs + heartbeatTimeoutMs(s.ttlMs));
      else if (this.stream) next = Math.min(next, s.nextBeatMonoMs);
    }
    if (!this.stream) next = Math.min(next, this.reconnectAtMonoMs);
    if (Number.isFinite(next)) this.timer = scheduler.setTimer(() => this.process(), Math.max(0, next - now));
  }

  private send(s: Session, now: number): void {
    assert(this.stream !== undefined, 'heartbeats go out on an open stream');
    s.inFlightSentMonoMs = now;
    this.observer.onHeartbeatSent?.(s.id, this.streamAddress);
    this.stream.write({ sessionId: s.id });
  }

  private openStream(): void {
    const address = this.ctx.pool.current();
    const stream = this.ctx.pool.stub(address).keepAlive(this.ctx.metadata?.() ?? new Metadata()) as Stream;
    this.stream = stream;
    this.streamAddress = address;
    stream.on('data', (res: lockservice.KeepAliveResponse) => this.onAnswer(stream, res));
    stream.on('error', (e: unknown) => this.failStream(stream, toFencerError(e)));
    stream.on('end', () => this.failStream(stream, new FencerError('SHUTTING_DOWN', `${address} ended the KeepAlive stream`)));
  }

  private dropStream(): void {
    const stream = this.stream;
    this.stream = undefined;
    if (!stream) return;
    // A heartbeat in flight is lost with its stream: send it again as soon as a new stream is open.
    const now = this.ctx.scheduler.monoMs();
    for (const s of this.sessions.values()) {
      if (s.inFlightSentMonoMs === undefined) continue;
      s.inFlightSentMonoMs = undefined;
      s.nextBeatMonoMs = Math.min(s.nextBeatMonoMs, now);
    }
    stream.removeAllListeners('data');
    stream.on('error', () => {}); // the cancel below surfaces as a CANCELLED error nobody needs
    stream.cancel();
  }

  private failStream(stream: Stream, error: FencerError): void {
    if (stream !== this.stream) return;
    this.recordFailure(error);
    this.process();
  }

  /** Drops the stream and decides where and when to reconnect: at once along a fresh leader hint, else the next endpoint after a backoff. */
  private recordFailure(error: FencerError): void {
    const address = this.streamAddress;
    this.dropStream();
    this.observer.onStreamFailed?.(address, error);
    const { pool, scheduler, random, policy } = this.ctx;
    const now = scheduler.monoMs();
    if (error.leaderHint && error.leaderHint !== address && this.hintHops < CLIENT_LIMITS.hintHopsMax) {
      pool.noteLeader(error.leaderHint);
      this.hintHops++;
      this.reconnectAtMonoMs = now;
    } else {
      this.hintHops = 0;
      if (error.leaderHint && error.leaderHint !== address) pool.noteLeader(error.leaderHint);
      else pool.advance(address);
      this.reconnectAtMonoMs = now + backoffMs(random, this.reconnectAttempt++, policy.backoffBaseMs, policy.backoffMaxMs);
    }
  }

  private onAnswer(stream: Stream, res: lockservice.KeepAliveResponse): void {
    if (stream !== this.stream) return;
    const s = this.sessions.get(res.sessionId);
    if (!s || s.inFlightSentMonoMs === undefined) return; // an answer for a session closed meanwhile
    const sent = s.inFlightSentMonoMs;
    s.inFlightSentMonoMs = undefined;
    this.reconnectAttempt = 0;
    this.hintHops = 0;
    const now = this.ctx.scheduler.monoMs();
    if (res.expired) {
      s.applyTransition(s.lease.expire());
    } else {
      s.applyTransition(s.lease.renew(sent, res.ttlMsRemaining, now));
      // Still in jeopardy (the answer left no lease time): try again soon rather than a third of a TTL later.
      s.nextBeatMonoMs = s.state === 'jeopardy' ? now + this.ctx.policy.backoffBaseMs : sent + heartbeatIntervalMs(s.ttlMs);
    }
    this.observer.onHeartbeatAnswered?.(s.id, res);
    this.process();
  }
}
