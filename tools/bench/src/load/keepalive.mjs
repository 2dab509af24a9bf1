// The KeepAlive load generator, for every system and suite: sessions (or
// leases) kept alive on S bidi streams written as raw gRPC frames over
// node:http2 (../grpc-frames.mjs), so the generator costs a few µs per
// heartbeat and is not what bounds the rate. Two pacings:
//
// - rate (open loop): every session once per interval, spread evenly over
//   it; one write per stream per PACE_MS carries every heartbeat due;
// - window (closed loop): W heartbeats in flight per stream, the next sent
//   as each answer arrives (writes coalesced per turn of the event loop).
//
// A system describes its wire with keepAliveWire(): the method's path,
// encode(id) → the request's protobuf bytes, decode(buf, start, end) →
// { key, expired }, and keyOf(id), the key decode() gives for that id.
import { grpcFrame, rawStreams } from '../grpc-frames.mjs';
import { histogram, nowMs, sleep } from '../measure.mjs';

/** The open-loop sender's pace: one write per stream this often. */
const PACE_MS = 10;
/** drain() waits at most this long for the answers still owed. */
const DRAIN_MS_MAX = 60_000;

/**
 * Opens `streams` KeepAlive streams, stream k on targets[k mod targets],
 * for the sessions `ids`. Nothing is sent until runRate() or startWindow().
 */
export function openKeepAlives({ targets, wire, ids, streams }) {
  const n = ids.length;
  const frames = ids.map((id) => grpcFrame(wire.encode(id)));
  const index = new Map(ids.map((id, i) => [wire.keyOf(id), i]));
  const sentAt = new Float64Array(n);
  /** 1 for a session some answer called expired: `expired` counts sessions, not answers (an expired one keeps being answered so). */
  const lapsed = new Uint8Array(n);
  const h = histogram();
  const state = { sent: 0, acked: 0, expired: 0, errors: 0, lastError: undefined, measuring: false, latency: h };
  const perTarget = targets.map((_, t) => Math.ceil((streams - t) / targets.length));
  let onAnswer = () => {};
  const onMessage = (b, at, end, streamOnTarget, t) => {
    const { key, expired } = wire.decode(b, at, end);
    const i = index.get(key);
    if (i === undefined) return;
    state.acked++;
    if (expired && lapsed[i] === 0) {
      lapsed[i] = 1;
      state.expired++;
    }
    if (state.measuring) h.record(nowMs() - sentAt[i]);
    onAnswer(streamOnTarget * targets.length + t);
  };
  const onEnd = (e) => {
    if (!e) return;
    state.errors++;
    state.lastError = e;
  };
  const conns = targets.map((address, t) =>
    rawStreams(address, wire.path, perTarget[t], (b, at, end, k) => onMessage(b, at, end, k, t), onEnd),
  );
  // Stream k is stream floor(k / targets) of target k mod targets: sessions spread evenly over them.
  const write = (k, buf) => conns[k % targets.length].write(Math.floor(k / targets.length), buf);
  const take = (now) => {
    const i = state.sent++ % n;
    sentAt[i] = now;
    return frames[i];
  };

  state.runRate = (seconds, intervalMs) => sendAtRate({ state, take, write, streams, n }, seconds, intervalMs);
  state.startWindow = (window) => {
    state.stopWindow = keepWindow({ take, write, streams }, window, (handler) => (onAnswer = handler));
  };

  /** Waits until every heartbeat sent was answered (or DRAIN_MS_MAX passed, or a stream failed); the ms waited. */
  state.drain = async () => {
    const t0 = nowMs();
    while (state.acked < state.sent && nowMs() - t0 < DRAIN_MS_MAX && state.errors === 0) await sleep(PACE_MS);
    return nowMs() - t0;
  };

  state.close = () => Promise.all(conns.map((c) => c.close()));
  return state;
}

/** Sends `n / intervalMs` heartbeats per second for `seconds`, one write per stream per PACE_MS; resolves with the count sent. */
async function sendAtRate({ state, take, write, streams, n }, seconds, intervalMs) {
  const perS = n / (intervalMs / 1000);
  const t0 = nowMs();
  const from = state.sent;
  const perStream = Array.from({ length: streams }, () => []);
  for (let last = false; !last;) {
    const elapsedMs = nowMs() - t0;
    // The last pass sends whatever the whole window owes, so the offered rate is the one asked for.
    last = elapsedMs >= seconds * 1000;
    const due = from + Math.floor((last ? seconds : elapsedMs / 1000) * perS);
    const now = nowMs();
    while (state.sent < due) perStream[state.sent % streams].push(take(now));
    for (let k = 0; k < streams; k++) {
      if (perStream[k].length === 0) continue;
      write(k, Buffer.concat(perStream[k]));
      perStream[k].length = 0;
    }
    if (!last) await sleep(PACE_MS);
  }
  return state.sent - from;
}

/**
 * Keeps `window` heartbeats in flight on every stream: `onAnswer` installs
 * the handler called with a stream's index per answer. Returns stop().
 */
function keepWindow({ take, write, streams }, window, onAnswer) {
  const owed = new Array(streams).fill(window);
  let flushing = false;
  let stopped = false;
  const flush = () => {
    flushing = false;
    if (stopped) return;
    const now = nowMs();
    for (let k = 0; k < streams; k++) {
      if (owed[k] === 0) continue;
      const batch = [];
      for (; owed[k] > 0; owed[k]--) batch.push(take(now));
      write(k, Buffer.concat(batch));
    }
  };
  onAnswer((k) => {
    owed[k]++;
    if (!flushing) {
      flushing = true;
      setImmediate(flush);
    }
  });
  flush();
  return () => {
    stopped = true;
    onAnswer(() => {});
  };
}
