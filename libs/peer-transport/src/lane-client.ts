/**
 * A caller's end of the lane (lane-frames.ts) to one node: one TCP connection,
 * opened on first use, many calls in flight on it, each with its own
 * deadline (on expiry the node is told CANCEL and the call fails
 * DEADLINE_EXCEEDED). A lost connection fails every call on it with
 * NO_LEADER; the next call dials again, and so does one after a connection
 * that went silent (a call's deadline passed with nothing received since it
 * was sent, and a PING got no PONG). A node that does not answer the
 * handshake with LANE_MAGIC speaks no lane: its calls come back
 * `unsupported` (the caller then uses gRPC), and the lane is tried again
 * after laneUnsupportedRetryMs (a node upgraded in place gains it).
 */
import net from 'node:net';
import { FencerError } from '@fencer/base';
import { lockservice } from '@fencer/protocol';
import type { TlsFiles } from '@fencer/service';
import { splitAddress } from './address.js';
import { ALPN, type AcceptsIdentity, dialTls } from './tls-links.js';
import {
  LANE_MAGIC,
  LANE_METHODS,
  LaneFrameReader,
  LaneFrameType,
  type LaneMethod,
  encodeLaneFrame,
  withToken,
  errorOfPayload,
  writeCoalesced,
} from './lane-frames.js';
import { laneConnectTimeoutMs, laneProbeTimeoutMs, laneSilenceProbeMs, laneUnsupportedRetryMs, timerDelayMsMax } from './limits.js';

const { LockServiceService } = lockservice;

/**
 * A call whose connection was lost before its answer came: the node closed
 * it or its process died (NO_LEADER, outcome unknown). A caller that sent it
 * to a leader looks for the new one at once (libs/routing leader-search.ts).
 */
export class LaneConnectionLost extends FencerError {
  constructor(message: string) {
    super('NO_LEADER', message);
  }
}

export type LaneResult = { ok: true; value: unknown } | { ok: false; error: FencerError } | { ok: false; unsupported: true };

interface Pending {
  readonly method: LaneMethod;
  readonly done: (r: LaneResult) => void;
  readonly timer: NodeJS.Timeout;
  /** performance.now() when it was handed to the socket. */
  readonly sentAt: number;
}

const METHOD_INDEX = new Map<LaneMethod, number>(LANE_METHODS.map((m, i) => [m, i]));

export class LaneClient {
  private socket: net.Socket | undefined;
  private ready = false;
  private handshake: Buffer = Buffer.alloc(0);
  private reader = new LaneFrameReader();
  private readonly pending = new Map<number, Pending>();
  /** CALL frames waiting for the handshake. */
  private queued: Buffer[] = [];
  private nextId = 1;
  /** performance.now() when the connection last brought anything. */
  private lastReceivedAt = 0;
  private probeTimer: NodeJS.Timeout | undefined;
  /** Runs while calls are pending: a connection silent for laneSilenceProbeMs is asked PING. */
  private silenceTimer: NodeJS.Timeout | undefined;
  /** PINGs the node answered (a silent spell that was only a slow call). */
  probesAnswered = 0;
  private unsupportedUntil = 0;
  private closed = false;

  /** `tls`: dial with mutual TLS, taking a node whose certificate `accepts` takes (a router: any replica; a follower: its cell's). */
  constructor(
    readonly address: string,
    private readonly tls?: { readonly files: TlsFiles; readonly accepts: AcceptsIdentity },
  ) {}

  /** False while the node is known to speak no lane. */
  get available(): boolean {
    return !this.closed && Date.now() >= this.unsupportedUntil;
  }

  /** One call; `done` is called exactly once unless the returned cancel runs first. */
  call(method: LaneMethod, request: unknown, deadlineMs: number, done: (r: LaneResult) => void, token?: string): () => void {
    if (!this.available) {
      done({ ok: false, unsupported: true });
      return () => {};
    }
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffff_fffe ? 1 : this.nextId + 1;
    const bytes = (LockServiceService[method].requestSerialize as (v: unknown) => Buffer)(request);
    // The caller's token rides in the call's own frame: the node checks it (CALL_WITH_TOKEN).
    const frame =
      token === undefined
        ? encodeLaneFrame(LaneFrameType.CALL, id, bytes, METHOD_INDEX.get(method)!)
        : encodeLaneFrame(LaneFrameType.CALL_WITH_TOKEN, id, withToken(token, bytes), METHOD_INDEX.get(method)!);
    const sentAt = performance.now();
    const timer = setTimeout(
      () => {
        if (!this.pending.delete(id)) return;
        this.send(encodeLaneFrame(LaneFrameType.CANCEL, id, Buffer.alloc(0)));
        if (this.lastReceivedAt < sentAt) this.probe();
        done({ ok: false, error: new FencerError('DEADLINE_EXCEEDED', `${method} at ${this.address}: deadline exceeded`) });
      },
      // setTimeout fires at once past 2^31-1 ms; a deadline weeks away waits that long instead.
      Math.min(timerDelayMsMax, Math.max(0, deadlineMs - Date.now())),
    );
    this.pending.set(id, { method, done, timer, sentAt });
    this.send(frame);
    this.watchSilence();
    return () => {
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      clearTimeout(p.timer);
      this.send(encodeLaneFrame(LaneFrameType.CANCEL, id, Buffer.alloc(0)));
    };
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.probeTimer);
    clearInterval(this.silenceTimer);
    this.silenceTimer = undefined;
    this.socket?.destroy();
    this.failAll(() => ({ ok: false, error: new FencerError('CANCELLED', 'the router is shutting down') }));
  }

  private send(frame: Buffer): void {
    // A socket destroyed here says 'close' only later: it is gone already.
    if (this.socket?.destroyed) this.lost(this.socket);
    if (this.ready) {
      writeCoalesced(this.socket!, frame);
      return;
    }
    this.queued.push(frame);
    if (!this.socket) this.dial();
  }

  private dial(): void {
    let target: { host: string; port: number };
    try {
      target = splitAddress(this.address);
    } catch (e) {
      // An address no connection can be made to: its calls fail as calls to a node that refused the connection.
      this.queued = [];
      this.failAll((p) => ({ ok: false, error: new FencerError('NO_LEADER', `${p.method}: ${(e as Error).message}`) }));
      return;
    }
    // With TLS the lane is asked for by ALPN; a node that does not agree to it speaks no lane (its magic never comes back).
    const socket =
      this.tls === undefined
        ? net.connect({ ...target, noDelay: true, timeout: laneConnectTimeoutMs })
        : dialTls(this.address, this.tls.files, [ALPN.lane], this.tls.accepts);
    if (this.tls !== undefined) {
      socket.setNoDelay(true);
      socket.setTimeout(laneConnectTimeoutMs);
    }
    this.socket = socket;
    this.ready = false;
    this.handshake = Buffer.alloc(0);
    this.reader = new LaneFrameReader();
    socket.write(LANE_MAGIC);
    socket.on('timeout', () => {
      if (!this.ready) socket.destroy(new Error(`no lane handshake within ${laneConnectTimeoutMs} ms`));
    });
    socket.on('data', (d: Buffer) => {
      if (this.socket !== socket) return;
      if (!this.ready) {
        this.handshake = Buffer.concat([this.handshake, d]);
        const n = Math.min(this.handshake.length, LANE_MAGIC.length);
        if (!this.handshake.subarray(0, n).equals(LANE_MAGIC.subarray(0, n))) return this.unsupported(socket);
        if (this.handshake.length < LANE_MAGIC.length) return;
        this.ready = true;
        socket.setTimeout(0);
        d = this.handshake.subarray(LANE_MAGIC.length);
        for (const f of this.queued) socket.write(f);
        this.queued = [];
        if (d.length === 0) return;
      }
      this.receive(socket, d);
    });
    socket.on('error', () => {});
    socket.on('close', () => this.lost(socket));
  }

  /** The connection is gone (closed, or destroyed and about to say so): its calls fail, the next call dials. */
  private lost(socket: net.Socket): void {
    if (this.socket !== socket) return;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.socket = undefined;
    this.ready = false;
    this.queued = [];
    this.failAll(
      (p) =>
        ({
          ok: false,
          error: new LaneConnectionLost(`${p.method} at ${this.address}: the connection was lost; its outcome is unknown`),
        }) as const,
    );
  }

  /**
   * While calls are pending, every laneSilenceProbeMs: if the connection
   * brought nothing for that long and a call has waited that long, PING.
   */
  private watchSilence(): void {
    if (this.silenceTimer !== undefined) return;
    this.silenceTimer = setInterval(() => {
      if (this.pending.size === 0) {
        clearInterval(this.silenceTimer);
        this.silenceTimer = undefined;
        return;
      }
      const quietSince = performance.now() - laneSilenceProbeMs;
      if (this.lastReceivedAt > quietSince) return;
      for (const p of this.pending.values()) {
        if (p.sentAt <= quietSince) return this.probe();
      }
    }, laneSilenceProbeMs);
    this.silenceTimer.unref();
  }

  /**
   * A call reached its deadline, or waited laneSilenceProbeMs on a silent
   * connection, and the node sent nothing since it was sent: ask it (PING). Nothing back within laneProbeTimeoutMs and the
   * connection is dropped (its calls fail NO_LEADER; the next call dials).
   */
  private probe(): void {
    const socket = this.socket;
    if (!socket || !this.ready || this.probeTimer) return;
    const askedAt = performance.now();
    this.send(encodeLaneFrame(LaneFrameType.PING, 0, Buffer.alloc(0)));
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      if (this.socket === socket && this.lastReceivedAt < askedAt)
        socket.destroy(new Error(`the node at ${this.address} answered no PING within ${laneProbeTimeoutMs} ms`));
    }, laneProbeTimeoutMs);
  }

  private receive(socket: net.Socket, d: Buffer): void {
    // Frames only: a call queued before the handshake counts as sent when the handshake let it go.
    this.lastReceivedAt = performance.now();
    const { frames, error } = this.reader.push(d);
    if (error !== undefined) {
      socket.destroy();
      return;
    }
    for (const f of frames) {
      if (f.type === LaneFrameType.PONG) {
        this.probesAnswered++;
        continue;
      }
      const p = this.pending.get(f.id);
      if (!p) continue; // cancelled or timed out already
      this.pending.delete(f.id);
      clearTimeout(p.timer);
      if (f.type === LaneFrameType.OK) {
        let value: unknown;
        try {
          value = LockServiceService[p.method].responseDeserialize(Buffer.from(f.payload));
        } catch (e) {
          p.done({
            ok: false,
            error: new FencerError('INTERNAL', `${p.method} at ${this.address}: undecodable answer (${(e as Error).message})`),
          });
          continue;
        }
        p.done({ ok: true, value });
      } else if (f.type === LaneFrameType.ERROR) {
        p.done({ ok: false, error: errorOfPayload(f.payload) });
      } else {
        p.done({ ok: false, error: new FencerError('INTERNAL', `${p.method} at ${this.address}: the node sent frame type ${f.type}`) });
        socket.destroy();
        return;
      }
    }
  }

  /** The node answered the handshake with something else: it speaks no lane. Its calls go to gRPC. */
  private unsupported(socket: net.Socket): void {
    this.unsupportedUntil = Date.now() + laneUnsupportedRetryMs;
    this.socket = undefined;
    this.ready = false;
    this.queued = [];
    socket.destroy();
    this.failAll(() => ({ ok: false, unsupported: true }) as const);
  }

  private failAll(result: (p: Pending) => LaneResult): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) {
      clearTimeout(p.timer);
      p.done(result(p));
    }
  }
}
