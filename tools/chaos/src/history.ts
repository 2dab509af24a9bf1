/**
 * The recorded history: what every client process invoked and what came
 * back, with monotonic times (CLOCK_MONOTONIC through process.hrtime, the
 * same clock in every process of the machine, so times from different
 * processes compare). One JSON record per line, one file per process.
 *
 * An operation is an `inv` record and at most one completion: `ok` (it
 * happened, with this result), `fail` (it definitely did not happen, or was
 * refused after looking at the state, e.g. SESSION_NOT_FOUND), or `unk` (the
 * outcome is unknown: it may or may not have happened). An `inv` without a
 * completion is unknown too.
 */
import { createWriteStream, readFileSync, readdirSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import { assert } from '@fencer/base';
import { HISTORY_RECORDS_PER_WORKER_MAX } from './limits.js';

/**
 * A client process run under faketime at rate R (FENCER_CHAOS_CLOCK_RATE
 * tells it R) reads a monotonic clock that runs R times the real one, from
 * a base of faketime's choosing; its history times are mapped back to real
 * time through an anchor, so they compare with every other process's. The
 * anchor is a round trip to the harness (own reading, the harness's real
 * reading, own reading), the shortest of several: the real reading was taken
 * somewhere inside it, so the mapping is off by at most half of it. That
 * bound is kept honest in the history: an invocation is recorded that much
 * earlier and a completion that much later, so a skewed client's operations
 * can only look more concurrent than they were, never ordered when they
 * were not (a 1,800 s soak on a loaded machine flagged two such false
 * orderings, 6-7 ms each, when the anchor was the harness's send time).
 */
export const CLOCK_RATE_ENV = 'FENCER_CHAOS_CLOCK_RATE';
const clockRate = Number(process.env[CLOCK_RATE_ENV] ?? '1');
assert(Number.isFinite(clockRate) && clockRate > 0, `${CLOCK_RATE_ENV} must be a positive number, got ${process.env[CLOCK_RATE_ENV]}`);
let anchor: { readonly readMs: number; readonly realMs: number; readonly uncertaintyMs: number } | undefined;
/** Round trips to the harness tried for the anchor; the shortest is kept. */
const ANCHOR_ROUNDS = 20;

function readMonoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Whether this process's clock is skewed and still waits for its anchor. */
export function needsClockAnchor(): boolean {
  return clockRate !== 1 && anchor === undefined;
}

/**
 * Ties this process's skewed clock to the harness's real one: `askRealMs`
 * returns the harness's real reading, taken while the call is in flight.
 */
export async function anchorClock(askRealMs: () => Promise<number>): Promise<void> {
  let best: { readMs: number; realMs: number; spanMs: number } | undefined;
  for (let i = 0; i < ANCHOR_ROUNDS; i++) {
    const before = readMonoMs();
    const realMs = await askRealMs();
    const after = readMonoMs();
    if (best === undefined || after - before < best.spanMs) best = { readMs: (before + after) / 2, realMs, spanMs: after - before };
  }
  assert(best !== undefined, 'the anchor takes at least one round trip');
  anchor = { readMs: best.readMs, realMs: best.realMs, uncertaintyMs: best.spanMs / 2 / clockRate };
}

/** How far this process's history times may be off real time, in milliseconds (0 unless its clock is skewed). */
export function clockUncertaintyMs(): number {
  return anchor?.uncertaintyMs ?? 0;
}

/** Milliseconds on CLOCK_MONOTONIC (real rate): comparable across the processes of one machine. */
export function monoNowMs(): number {
  const readMs = readMonoMs();
  if (clockRate === 1) return readMs;
  assert(anchor !== undefined, 'a skewed client reads history time only after its clock anchor arrived');
  return anchor.realMs + (readMs - anchor.readMs) / clockRate;
}

export type Mode = 'X' | 'S';

export type OpArgs =
  | { readonly f: 'open'; readonly ns: string; readonly ttl: number }
  | { readonly f: 'close'; readonly s: string }
  | { readonly f: 'acquire'; readonly s: string; readonly name: string; readonly mode: Mode; readonly wait: number; readonly req: string }
  | { readonly f: 'release'; readonly s: string; readonly name: string; readonly token: number }
  | { readonly f: 'get'; readonly name: string }
  | { readonly f: 'ctr-read'; readonly name: string; readonly token: number }
  | { readonly f: 'ctr-write'; readonly name: string; readonly token: number; readonly value: number };

export type AcquireStatus = 'GRANTED' | 'TIMED_OUT' | 'QUEUED';

export type OpResult =
  | { readonly f: 'open'; readonly s: string; readonly ttl: number }
  | { readonly f: 'close'; readonly released: readonly string[] }
  | { readonly f: 'acquire'; readonly status: AcquireStatus; readonly token: number; readonly rev: number }
  /** `retried`: an earlier attempt failed in a way that may have applied it (so `released: false` is ambiguous). */
  | { readonly f: 'release'; readonly released: boolean; readonly retried: boolean }
  | {
      readonly f: 'get';
      readonly rev: number;
      readonly holders: ReadonlyArray<readonly [session: string, token: number, mode: Mode]>;
      readonly waiters: ReadonlyArray<readonly [session: string, mode: Mode, req: string]>;
    }
  | { readonly f: 'ctr-read'; readonly accepted: boolean; readonly value: number }
  | { readonly f: 'ctr-write'; readonly accepted: boolean };

/** One watch stream, from its start to its end. Events are [revision, type, name, session, token]. */
export interface WatchSegment {
  readonly prefix: string;
  readonly endpoint: number;
  readonly since: number;
  readonly tStart: number;
  readonly tEnd: number;
  readonly events: ReadonlyArray<readonly [revision: number, type: WatchType, name: string, session: string, token: number]>;
  /** 'cancelled' (the watcher left), 'overflow' (too many events kept), or the error code that ended it. */
  readonly end: string;
}

export type WatchType = 'SNAPSHOT' | 'ACQUIRED' | 'RELEASED' | 'EXPIRED' | 'QUEUED' | 'CANCELED' | 'PROGRESS';

export type HistoryRecord =
  | { readonly k: 'inv'; readonly p: string; readonly id: number; readonly t: number; readonly op: OpArgs }
  | { readonly k: 'ok'; readonly p: string; readonly id: number; readonly t: number; readonly r: OpResult }
  | { readonly k: 'fail' | 'unk'; readonly p: string; readonly id: number; readonly t: number; readonly code: string }
  /** A heartbeat sent at `sent` was acknowledged (alive) at `t` with `ttl` (ttl_ms_remaining) ms left. */
  | { readonly k: 'hb'; readonly p: string; readonly s: string; readonly sent: number; readonly t: number; readonly ttl: number }
  /** KeepAlive answered that the session is gone. */
  | { readonly k: 'end'; readonly p: string; readonly s: string; readonly t: number }
  /** The client stopped heartbeating this session on purpose (it will expire). */
  | { readonly k: 'abandon'; readonly p: string; readonly s: string; readonly t: number }
  | { readonly k: 'watch'; readonly p: string; readonly seg: WatchSegment };

/** Appends records of one process to its file. */
export class HistoryWriter {
  private readonly out: WriteStream;
  private nextId = 1;
  private records = 0;

  constructor(
    readonly file: string,
    readonly process: string,
  ) {
    this.out = createWriteStream(file, { flags: 'a' });
  }

  get full(): boolean {
    return this.records >= HISTORY_RECORDS_PER_WORKER_MAX;
  }

  private write(record: HistoryRecord): void {
    this.records++;
    this.out.write(`${JSON.stringify(record)}\n`);
  }

  invoke(op: OpArgs): number {
    const id = this.nextId++;
    this.write({ k: 'inv', p: this.process, id, t: monoNowMs() - clockUncertaintyMs(), op });
    return id;
  }

  ok(id: number, r: OpResult): void {
    this.write({ k: 'ok', p: this.process, id, t: monoNowMs() + clockUncertaintyMs(), r });
  }

  fail(id: number, code: string): void {
    this.write({ k: 'fail', p: this.process, id, t: monoNowMs() + clockUncertaintyMs(), code });
  }

  unknown(id: number, code: string): void {
    this.write({ k: 'unk', p: this.process, id, t: monoNowMs() + clockUncertaintyMs(), code });
  }

  heartbeat(s: string, sent: number, ttlMsRemaining: number): void {
    this.write({ k: 'hb', p: this.process, s, sent, t: monoNowMs(), ttl: ttlMsRemaining });
  }

  sessionEnded(s: string): void {
    this.write({ k: 'end', p: this.process, s, t: monoNowMs() });
  }

  abandoned(s: string): void {
    this.write({ k: 'abandon', p: this.process, s, t: monoNowMs() });
  }

  watch(seg: WatchSegment): void {
    this.write({ k: 'watch', p: this.process, seg });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.out.end(() => resolve()));
  }
}

/** One operation as the checkers see it: invocation, completion (Infinity when none) and outcome. */
export interface Op {
  readonly p: string;
  readonly id: number;
  readonly inv: number;
  readonly comp: number;
  readonly op: OpArgs;
  readonly outcome: 'ok' | 'fail' | 'unk';
  readonly r?: OpResult;
  readonly code?: string;
}

export interface SessionFacts {
  /** Latest send time of an acknowledged heartbeat. */
  lastAckedSendMs: number;
  /**
   * The acknowledged heartbeat whose promise reaches furthest: alive until
   * at least `ttlMs` (its ttl_ms_remaining) after `sentMs`, by the leader's
   * clock. Absent when no heartbeat was acknowledged.
   */
  lastPromise?: { sentMs: number; ttlMs: number };
  /** Earliest time the client learned the session was gone (KeepAlive), if it did. */
  endSeenMs: number;
  abandonedMs: number;
}

export interface History {
  readonly ops: Op[];
  readonly sessions: Map<string, SessionFacts>;
  readonly watches: Array<{ p: string; seg: WatchSegment }>;
  /** Records that did not parse (a torn last line of a killed process). */
  readonly badLines: number;
}

/** Reads every `*.jsonl` history file in `dir`. */
export function loadHistory(dir: string): History {
  const ops: Op[] = [];
  const sessions = new Map<string, SessionFacts>();
  const watches: Array<{ p: string; seg: WatchSegment }> = [];
  let badLines = 0;
  const facts = (s: string): SessionFacts => {
    let f = sessions.get(s);
    if (!f) {
      f = { lastAckedSendMs: -Infinity, endSeenMs: Infinity, abandonedMs: Infinity };
      sessions.set(s, f);
    }
    return f;
  };
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.jsonl'))
    .sort()) {
    const invs = new Map<number, Extract<HistoryRecord, { k: 'inv' }>>();
    const done = new Map<number, HistoryRecord>();
    for (const line of readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      if (line === '') continue;
      let rec: HistoryRecord;
      try {
        rec = JSON.parse(line) as HistoryRecord;
      } catch {
        badLines++;
        continue;
      }
      switch (rec.k) {
        case 'inv':
          invs.set(rec.id, rec);
          break;
        case 'ok':
        case 'fail':
        case 'unk':
          assert(!done.has(rec.id), `${name}: operation ${rec.id} completed twice`);
          done.set(rec.id, rec);
          break;
        case 'hb': {
          const f = facts(rec.s);
          f.lastAckedSendMs = Math.max(f.lastAckedSendMs, rec.sent);
          if (rec.ttl > 0 && (f.lastPromise === undefined || rec.sent + rec.ttl > f.lastPromise.sentMs + f.lastPromise.ttlMs))
            f.lastPromise = { sentMs: rec.sent, ttlMs: rec.ttl };
          break;
        }
        case 'end': {
          const f = facts(rec.s);
          f.endSeenMs = Math.min(f.endSeenMs, rec.t);
          break;
        }
        case 'abandon':
          facts(rec.s).abandonedMs = rec.t;
          break;
        case 'watch':
          watches.push({ p: rec.p, seg: rec.seg });
          break;
      }
    }
    for (const [id, inv] of invs) {
      const c = done.get(id);
      if (c === undefined) {
        ops.push({ p: inv.p, id, inv: inv.t, comp: Infinity, op: inv.op, outcome: 'unk', code: 'NO_COMPLETION' });
      } else if (c.k === 'ok') {
        assert(c.t >= inv.t, 'completion after invocation');
        ops.push({ p: inv.p, id, inv: inv.t, comp: c.t, op: inv.op, outcome: 'ok', r: c.r });
      } else if (c.k === 'fail' || c.k === 'unk') {
        ops.push({ p: inv.p, id, inv: inv.t, comp: c.k === 'unk' ? Infinity : c.t, op: inv.op, outcome: c.k, code: c.code });
      }
    }
  }
  ops.sort((a, b) => a.inv - b.inv);
  return { ops, sessions, watches, badLines };
}

/** Operations of one kind by how they ended. */
export interface OpTally {
  ok: number;
  fail: number;
  unknown: number;
}

/** The history's operations counted by kind (`f`) and outcome, as a run's report gives them. */
export function opsByKind(ops: readonly Op[]): Record<string, OpTally> {
  const byKind: Record<string, OpTally> = {};
  for (const op of ops) {
    const k = (byKind[op.op.f] ??= { ok: 0, fail: 0, unknown: 0 });
    if (op.outcome === 'ok') k.ok++;
    else if (op.outcome === 'fail') k.fail++;
    else k.unknown++;
  }
  return byKind;
}
