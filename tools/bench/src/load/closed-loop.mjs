// The closed-loop load generator for unary calls (lock cycles, try-locks,
// reads, heartbeat batches): N client loops in this one process, each
// waiting for its answer before its next call, a warm-up and then a
// measured window with latencies and CPU.
import { CpuWindow, histogram, sleep } from '../measure.mjs';

/** A loop whose operation failed outright waits this long before the next one. */
const FAILED_OP_PAUSE_MS = 50;

/**
 * Runs `clients` loops of `op(i)` for `warmupS` then `seconds` measured.
 * `op` resolves with the latency (ms) to record, or undefined; operations
 * completing inside the window count. `weight(result)` (default 1) is what
 * one operation adds to `ops` (a heartbeat batch: the sessions answered).
 */
export async function closedLoop(system, clients, { warmupS, seconds }, op, weight = () => 1) {
  const h = histogram();
  const cpu = new CpuWindow(
    () => system.pids(),
    () => system.leaderPid?.(),
  );
  let phase = 'warmup';
  let ops = 0;
  let errors = 0;
  let lastError;
  const loop = async (i) => {
    while (phase !== 'done') {
      try {
        const r = await op(i);
        if (phase !== 'measure') continue;
        ops += weight(r);
        const lat = typeof r === 'number' ? r : r?.latencyMs;
        if (lat !== undefined) h.record(lat);
      } catch (e) {
        errors++;
        lastError = e;
        await sleep(FAILED_OP_PAUSE_MS);
      }
    }
  };
  const loops = Array.from({ length: clients }, (_, i) => loop(i));
  await sleep(warmupS * 1000);
  const failures0 = system.failures;
  phase = 'measure';
  cpu.begin();
  await sleep(seconds * 1000);
  const c = cpu.end();
  phase = 'done';
  const failed = system.failures - failures0;
  await Promise.all(loops);
  if (errors > 0) console.warn(`  ${system.key}: ${errors} operations failed outright (last: ${lastError?.message ?? lastError})`);
  return { ops, rate: ops / c.wallS, p50: h.pMs(50), p99: h.pMs(99), failed: failed + errors, cpu: c };
}
