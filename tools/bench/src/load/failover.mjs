// The failover load: clients run uncontended lock cycles while the
// system's leader is killed (kill -9) and later restarted, trial after
// trial. Unavailability is the time from the kill to the first acquire sent
// after the kill that succeeds.
import { CpuWindow, nowMs, pool, sleep } from '../measure.mjs';

/** Calm load before each kill, so the cluster is steady when it happens. */
const SETTLE_MS = 3_000;
/** The rate before the kill is counted over this window. */
const RATE_WINDOW_MS = 1_000;
/** A trial gives up waiting for the first success after this. */
const RECOVERY_MS_MAX = 30_000;
/** After the first success, load goes on this long before the killed member is restarted. */
const AFTER_RECOVERY_MS = 2_000;
/** A loop whose cycle failed waits this long before the next. */
const RETRY_PAUSE_MS = 20;
/** Lock names each client cycles through. */
const NAMES_PER_CLIENT = 4;

function trialLoad(system, sessions) {
  const s = { running: true, okBeforeKill: 0, killedAt: Infinity, firstOkAfterKill: Infinity };
  s.loops = sessions.map(async (session, i) => {
    for (let n = 0; s.running; n++) {
      try {
        const h = await session.lock(system.lockName(`failover/c${i}/n${n % NAMES_PER_CLIENT}`));
        const end = nowMs();
        if (h.startedMs >= s.killedAt && end < s.firstOkAfterKill) s.firstOkAfterKill = end;
        if (s.killedAt === Infinity) s.okBeforeKill++;
        await session.unlock(h);
      } catch {
        await sleep(RETRY_PAUSE_MS);
      }
    }
  });
  return s;
}

async function oneTrial(system, load) {
  await sleep(SETTLE_MS);
  const failures0 = system.failures;
  load.okBeforeKill = 0;
  const calm0 = nowMs();
  await sleep(RATE_WINDOW_MS);
  const rateBefore = load.okBeforeKill / ((nowMs() - calm0) / 1000);
  load.firstOkAfterKill = Infinity;
  const { killedAtMs, id } = await system.killLeader();
  load.killedAt = killedAtMs;
  while (load.firstOkAfterKill === Infinity && nowMs() < killedAtMs + RECOVERY_MS_MAX) await sleep(RETRY_PAUSE_MS);
  await sleep(AFTER_RECOVERY_MS);
  const trial = { unavailableMs: load.firstOkAfterKill - killedAtMs, failed: system.failures - failures0, killed: id, rateBefore };
  load.killedAt = Infinity;
  await system.restartKilled();
  return trial;
}

/** `trials` kills of the leader under `clients` clients' load; the worst unavailability and every trial. */
export async function failover(system, { clients, trials }) {
  const sessions = await pool(clients, 64, () => system.openSession(300));
  const cpu = new CpuWindow(() => system.pids());
  const results = [];
  const load = trialLoad(system, sessions);
  try {
    cpu.begin();
    for (let t = 0; t < trials; t++) results.push(await oneTrial(system, load));
  } finally {
    load.running = false;
    await Promise.all(load.loops);
    await pool(sessions.length, 64, (i) => sessions[i].close());
  }
  return {
    ops: results.length,
    unavailableMs: Math.max(...results.map((r) => r.unavailableMs)),
    trials: results,
    failed: results.reduce((a, r) => a + r.failed, 0),
    cpu: cpu.end(),
    note: `unavailable ${results.map((r) => `${Math.round(r.unavailableMs)} ms`).join(', ')} (kill → first acquire sent after the kill succeeds); ~${Math.round(results[0]?.rateBefore ?? 0)} cycles/s before the kill`,
  };
}
