// The fleet-load suite's report, pure: CPU and RSS by component from
// per-process figures, the reconnect storm's peaks and time to steady
// from its sampled timeline, the section of docs/benchmarks.md and its
// summary rows.
import { byComponent } from '../measure.mjs';
import { fmt, markdownTable } from '../report.mjs';

const { int, ms } = fmt;
const MiB = 2 ** 20;
/** Heartbeats are back to steady once a window's acknowledged rate is at least this share of the offered rate. */
export const STEADY_SHARE = 0.95;

/**
 * CPU (cores) and RSS (MiB, all and largest process) per component:
 * `cpuPerPid` in CPU seconds over `wallS`, `rssPerPid` in bytes, `componentOf` pid → name.
 */
export function componentTable(cpuPerPid, rssPerPid, componentOf, wallS) {
  const cpu = byComponent(cpuPerPid, componentOf);
  const rss = byComponent(rssPerPid, componentOf);
  return cpu.map((c) => {
    const mine = Object.entries(rssPerPid).filter(([pid]) => (componentOf.get(Number(pid)) ?? 'other') === c.component);
    return {
      component: c.component,
      processes: c.processes,
      cores: c.total / wallS,
      rssMiB: (rss.find((r) => r.component === c.component)?.total ?? 0) / MiB,
      rssMaxMiB: Math.max(0, ...mine.map(([, b]) => b ?? 0)) / MiB,
    };
  });
}

/**
 * The storm's figures from its timeline: `samples` [{ t (ms since the
 * proxies were stopped), acked, leaderCpuS }] cumulative, in time order;
 * `sessions` kept alive, `offeredPerS` their steady rate. Peak rates over
 * `binMs` bins; reopenings are the first `sessions` answers after the
 * restart (every session's first heartbeat on its new stream); steady is
 * the end of the first bin from which every bin acknowledges at least
 * STEADY_SHARE of the offered rate.
 */
export function stormFigures(samples, { sessions, offeredPerS, binMs = 500 }) {
  const bins = [];
  let from = samples[0];
  for (const s of samples.slice(1)) {
    if (s.t - from.t < binMs) continue;
    const dtS = (s.t - from.t) / 1000;
    const reopened = Math.min(s.acked, sessions) - Math.min(from.acked, sessions);
    bins.push({
      t: s.t,
      hbPerS: (s.acked - from.acked) / dtS,
      reopenPerS: reopened / dtS,
      leaderCores: (s.leaderCpuS - from.leaderCpuS) / dtS,
    });
    from = s;
  }
  const ok = (b) => b.hbPerS >= STEADY_SHARE * offeredPerS;
  let steadyAt;
  for (let i = bins.length - 1; i >= 0 && ok(bins[i]); i--) steadyAt = i;
  const max = (f) => Math.max(0, ...bins.map(f));
  return {
    bins,
    peakHbPerS: max((b) => b.hbPerS),
    peakReopenPerS: max((b) => b.reopenPerS),
    peakLeaderCores: max((b) => b.leaderCores),
    steadyMs: steadyAt === undefined ? undefined : bins[steadyAt].t,
  };
}

const mib = (x) => (Number.isFinite(x) ? `${Math.round(x)}` : '—');

function componentsMd(rows) {
  return markdownTable(
    ['component', 'processes', 'CPU, cores', 'RSS, MiB in all', 'RSS, MiB largest'],
    rows.map((c) => [c.component, c.processes, c.cores.toFixed(2), mib(c.rssMiB), mib(c.rssMaxMiB)]),
  );
}

function steadyMd(s, o) {
  return [
    '### Steady load',
    '',
    `${int(o.sessions)} sessions (tenants ${s.heartbeatTenants.join(', ')}, one per cell; opened in ${s.openS.toFixed(1)} s) heartbeat through the proxies, each every ${o.intervalMs} ms on ${o.streams} streams, while ${o.clients} clients run acquire+release cycles over ${s.lockTenants.length} tenants on all cells (client i in tenant i mod ${s.lockTenants.length}, each on its own name). ${o.seconds} s measured after ${o.warmup} s of warm-up.`,
    '',
    markdownTable(
      ['operation', 'rate', 'p50', 'p99', 'failed'],
      [
        [
          'heartbeat (KeepAlive through a proxy, to the answer)',
          `${int(s.hb.ackedPerS)}/s of ${int(s.hb.offeredPerS)}/s offered`,
          ms(s.hb.p50),
          ms(s.hb.p99),
          `${s.hb.errors} stream errors, ${s.hb.expired} sessions expired`,
        ],
        ['acquire (through the router)', `${int(s.lock.rate)} cycles/s`, ms(s.lock.p50), ms(s.lock.p99), s.lock.failed],
      ],
      ['l', 'r', 'r', 'r', 'l'],
    ),
    '',
    `CPU over the window and RSS at its end, by component (the machine's ${s.machineCores.toFixed(2)} busy cores of ${s.cores} in all):`,
    '',
    componentsMd(s.components),
    '',
  ];
}

function stormMd(st, o) {
  const f = st.figures;
  return [
    '### Reconnect storm',
    '',
    `Under the same heartbeats (the lock load stopped), every proxy got SIGTERM at once and was started again at once; the clients reconnected as soon as a proxy listened (${(st.upMs / 1000).toFixed(1)} s after the stop) and sent a KeepAlive for every session at once, then went on at their interval. Sampled every ${st.sampleMs} ms for ${o.stormSeconds} s, in ${st.binMs} ms bins.`,
    '',
    markdownTable(
      ['figure', 'value'],
      [
        ['sessions that expired', `${st.expired} of ${int(o.sessions)}${st.expired === 0 ? ' (none)' : ''}`],
        ['peak heartbeats acknowledged', `${int(f.peakHbPerS)}/s (steady offer ${int(st.offeredPerS)}/s)`],
        ['peak session reopenings (first heartbeat on a new stream)', `${int(f.peakReopenPerS)}/s`],
        ["peak CPU of the cells' leaders together", `${f.peakLeaderCores.toFixed(2)} cores`],
        [
          'from the stop to heartbeats back to steady (≥ 95% of the offer in every later bin)',
          f.steadyMs === undefined ? 'not within the window' : `${(f.steadyMs / 1000).toFixed(1)} s`,
        ],
      ],
      ['l', 'r'],
    ),
    '',
  ];
}

export function renderMarkdown(meta, result, o) {
  return [
    '## Fleet under load: heartbeats and locks on every cell, and a reconnect storm',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 16).replace('T', ' ')} UTC: ${meta.cpu}, Node ${meta.node}; load average ${meta.loadStart} at the start and ${meta.loadEnd} at the end${meta.provisional ? ' — **provisional**: the machine was shared with other work' : ''}.`,
    '',
    `- **${meta.fleet.label}** (${meta.fleet.version}): ${meta.fleet.settings}.`,
    `- "Offered" is what the load generator sent in the window: when it falls behind its pace (a starved machine), the proxies answer the backlog too, and the acknowledged rate can pass it.`,
    '',
    ...(result.steady ? steadyMd(result.steady, o) : []),
    ...(result.storm ? stormMd(result.storm, o) : []),
    ...(result.errors?.length ? ['Failed parts:', '', ...result.errors.map((e) => `- ${e}`), ''] : []),
  ].join('\n');
}

export function summaryRows(meta, result, o) {
  const rows = [];
  const s = result.steady;
  if (s)
    rows.push({
      id: 'fleet-load-steady',
      figure: `Fleet of ${meta.fleet.cells} cells × ${meta.fleet.replicas}: heartbeats/s through the proxies (${int(o.sessions)} sessions) and lock cycles/s over ${s.lockTenants.length} tenants at once, acquire p50 / p99`,
      value: `${int(s.hb.ackedPerS)} and ${int(s.lock.rate)}, ${ms(s.lock.p50)} / ${ms(s.lock.p99)}`,
      command: meta.command,
    });
  const st = result.storm;
  if (st)
    rows.push({
      id: 'fleet-load-storm',
      figure: 'Reconnect storm (every proxy restarted): expired sessions, peak heartbeats/s, time to steady',
      value: `${st.expired}, ${int(st.figures.peakHbPerS)}/s, ${st.figures.steadyMs === undefined ? '—' : `${(st.figures.steadyMs / 1000).toFixed(1)} s`}`,
      command: meta.command,
    });
  return rows;
}
