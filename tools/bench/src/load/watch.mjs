// The watch fan-out load: W watchers on one prefix (spread over the
// system's members as its clients would be), one writer granting a new
// name under it R times a second; delivery latency from the writer's
// acquire call to each watcher's event.
import { CpuWindow, histogram, nowMs, pool, sleep } from '../measure.mjs';

/** Watches are opened this many at a time. */
const WATCH_OPEN_WIDTH = 50;
/** After the last grant, deliveries still arriving this long after count. */
const STRAGGLERS_MS = 1_000;

/** The grant number an event is about: from its key, or (key null: ZooKeeper only says "changed") the latest grant. */
function grantOf(prefix, key, latest) {
  if (key === null) return latest;
  const m = /\/n(\d+)(\/|$)/.exec(key.slice(prefix.length - 1));
  return m ? Number(m[1]) : undefined;
}

export async function watchFanout(system, { watchers, ratePerS, seconds }) {
  const prefix = system.lockName('watched/');
  const issued = new Map();
  const h = histogram();
  let delivered = 0;
  let measuring = false;
  let k = 0;
  const onEvent = (key) => {
    const at = issued.get(grantOf(prefix, key, k));
    if (at === undefined || !measuring) return;
    delivered++;
    h.record(nowMs() - at);
  };
  const watches = await pool(watchers, WATCH_OPEN_WIDTH, (i) => system.watch(i, prefix, onEvent));
  const writer = await system.openSession(300);
  const cpu = new CpuWindow(() => system.pids());
  const failures0 = system.failures;
  try {
    measuring = true;
    cpu.begin();
    for (const until = nowMs() + seconds * 1000; nowMs() < until;) {
      const tick = nowMs();
      issued.set(++k, nowMs());
      await writer.unlock(await writer.lock(`${prefix}n${k}`));
      const rest = 1000 / ratePerS - (nowMs() - tick);
      if (rest > 0) await sleep(rest);
    }
    await sleep(STRAGGLERS_MS);
    const c = cpu.end();
    measuring = false;
    const expected = k * watchers;
    return {
      ops: delivered,
      rate: delivered / c.wallS,
      p50: h.pMs(50),
      p99: h.pMs(99),
      failed: system.failures - failures0,
      cpu: c,
      note: `${k} grants at ${ratePerS}/s × ${watchers} watchers: ${delivered.toLocaleString('en-US')} of ${expected.toLocaleString('en-US')} delivered; latency from the writer's acquire call to each watcher`,
    };
  } finally {
    for (const w of watches) w.close();
    await writer.close();
  }
}
