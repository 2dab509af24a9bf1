// The efficiency suite's report, pure: server CPU per operation from a
// row's CPU window, the side-by-side tables, the section of
// docs/benchmarks.md, its summary rows, and the charts (SVG) the top of
// that file shows. Every ratio is Fencer against a peer from the same run.
import { barChart, lineChart } from '../charts.mjs';
import { fmt, markdownTable } from '../report.mjs';

const { int, ms } = fmt;
const measured = (r) => r !== undefined && !r.error && !r.skipped && r.ops > 0;

/** Server CPU per operation in ms (every server process of the system over the window), or undefined. */
export function cpuMsPerOp(cpu, ops) {
  return ops > 0 && cpu ? (cpu.serverS * 1000) / ops : undefined;
}

/** CPU per operation of each component, in ms: `components` is byComponent()'s list of CPU seconds. */
export function componentsPerOp(components, ops) {
  return (components ?? []).map((c) => ({
    component: c.component,
    processes: c.processes,
    cpuMsPerOp: ops > 0 ? (c.total * 1000) / ops : undefined,
  }));
}

/** The median round of a system in a scenario, by rate (every round listed in its note). */
export function pick(results, scenario, system) {
  const all = results.filter((r) => r.scenario === scenario && r.system === system);
  const ok = all.filter(measured);
  if (ok.length <= 1) return ok[0] ?? all[0];
  const sorted = [...ok].sort((a, b) => a.rate - b.rate);
  const mid = sorted[(sorted.length - 1) >> 1];
  return {
    ...mid,
    note: `${mid.note ? `${mid.note}; ` : ''}median of ${ok.length} rounds by rate (${ok.map((r) => `${int(r.rate)}/s`).join(', ')})`,
  };
}

/** "1.23×" of Fencer's figure against a peer's, or "—". */
const times = (a, b) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : '—');
const cpuText = (v) => (v === undefined ? '—' : v >= 1 ? `${v.toFixed(2)} ms` : `${Math.round(v * 1000)} µs`);

/** Short names for charts and tables: "Fencer", "ZooKeeper-3", "etcd-5". */
export function shortName(system) {
  if (system.key.startsWith('zk')) return `ZooKeeper-${system.key.slice(2)}`;
  if (system.key.startsWith('etcd')) return `etcd-${system.key.slice(4)}`;
  return 'Fencer';
}

function cyclesTable(meta, results) {
  const [fencer, ...peers] = meta.systems;
  const head = ['clients', ...meta.systems.flatMap((s) => [`${shortName(s)}: cycles/s`, 'p50 / p99', 'server CPU per cycle'])];
  head.push(...peers.map((p) => `Fencer / ${shortName(p)}: throughput, CPU per cycle`));
  const rows = meta.clients.map((n) => {
    const key = `cycles-${n}`;
    const f = pick(results, key, fencer.key);
    const cells = meta.systems.flatMap((s) => {
      const r = pick(results, key, s.key);
      if (!measured(r)) return [r?.skipped ?? (r?.error ? 'error' : '—'), '', ''];
      return [int(r.rate), `${ms(r.p50)} / ${ms(r.p99)}`, cpuText(r.cpuMsPerOp)];
    });
    const ratios = peers.map((p) => {
      const r = pick(results, key, p.key);
      return measured(f) && measured(r) ? `${times(f.rate, r.rate)}, ${times(f.cpuMsPerOp, r.cpuMsPerOp)}` : '—';
    });
    return [String(n), ...cells, ...ratios];
  });
  return markdownTable(head, rows);
}

function upkeepTable(meta, results) {
  const fencer = pick(results, 'upkeep', meta.systems[0].key);
  const rows = meta.systems.map((s) => {
    const r = pick(results, 'upkeep', s.key);
    const what = s.key.startsWith('zk') ? 'session ping' : s.key.startsWith('etcd') ? 'LeaseKeepAlive' : 'KeepAlive through the proxies';
    if (!measured(r)) return [shortName(s), what, r?.error ? `error: ${r.error.split('\n')[0]}` : '—', '', '', ''];
    return [
      shortName(s),
      what,
      `${int(r.rate)}/s of ${int(r.offeredPerS)}/s offered`,
      cpuText(r.cpuMsPerOp),
      s === meta.systems[0] ? '' : times(fencer?.cpuMsPerOp, r.cpuMsPerOp),
      r.note ?? '',
    ];
  });
  return markdownTable(['system', 'message', 'messages answered', 'server CPU per message', 'Fencer / this', 'notes'], rows, [
    'l',
    'l',
    'r',
    'r',
    'r',
    'l',
  ]);
}

/** Where Fencer's CPU went, by component, per cycle (at each client count) and per KeepAlive. */
function componentsTable(meta, results) {
  const fencer = meta.systems[0];
  const keys = [...meta.clients.map((n) => `cycles-${n}`), 'upkeep'];
  const rowsOf = keys.map((k) => pick(results, k, fencer.key)).map((r) => (measured(r) ? (r.components ?? []) : []));
  const names = [...new Set(rowsOf.flat().map((c) => c.component))];
  if (names.length === 0) return [];
  const head = ['component', ...meta.clients.map((n) => `per cycle, ${n} client${n > 1 ? 's' : ''}`), 'per KeepAlive'];
  const rows = names.map((name) => [name, ...rowsOf.map((cs) => cpuText(cs.find((c) => c.component === name)?.cpuMsPerOp))]);
  return [
    '',
    `Fencer's server CPU by component (${rowsOf[0].map((c) => `${c.component}: ${c.processes}`).join(', ')} processes):`,
    '',
    markdownTable(head, rows),
  ];
}

/** The targets issue 32 sets against ZooKeeper-3 and etcd-5, judged on this run. */
export function targets(meta, results) {
  const fencer = meta.systems[0];
  const zk = meta.systems.find((s) => s.key === 'zk3');
  const etcd = meta.systems.find((s) => s.key === 'etcd5');
  const at = (key, s) => (s ? pick(results, key, s.key) : undefined);
  const f64 = at('cycles-64', fencer);
  const z64 = at('cycles-64', zk);
  const f1 = at('cycles-1', fencer);
  const judge = (ok, f, ...peers) => (![f, ...peers].every(measured) ? 'not measured' : ok ? '**met**' : '**missed**');
  const out = [];
  if (meta.clients.includes(64))
    out.push(
      ['64 clients: throughput ≥ ZooKeeper-3', judge(f64?.rate >= z64?.rate, f64, z64), `${int(f64?.rate)} / ${int(z64?.rate)} cycles/s`],
      [
        '64 clients: server CPU per cycle ≤ ZooKeeper-3',
        judge(f64?.cpuMsPerOp <= z64?.cpuMsPerOp, f64, z64),
        `${cpuText(f64?.cpuMsPerOp)} / ${cpuText(z64?.cpuMsPerOp)}`,
      ],
    );
  const fu = at('upkeep', fencer);
  const zu = at('upkeep', zk);
  out.push([
    'server CPU per KeepAlive ≤ ZooKeeper-3 per session ping',
    judge(fu?.cpuMsPerOp <= zu?.cpuMsPerOp, fu, zu),
    `${cpuText(fu?.cpuMsPerOp)} / ${cpuText(zu?.cpuMsPerOp)}`,
  ]);
  if (meta.clients.includes(1)) {
    const z1 = at('cycles-1', zk);
    const e1 = at('cycles-1', etcd);
    out.push([
      '1 client: p50 ≤ ZooKeeper-3 and etcd-5',
      judge(f1?.p50 <= z1?.p50 && f1?.p50 <= e1?.p50, f1, z1, e1),
      `${ms(f1?.p50)} / ${ms(z1?.p50)} / ${ms(e1?.p50)}`,
    ]);
  }
  return out;
}

export function renderMarkdown(meta, results) {
  return [
    '## Efficiency: Fencer through its routers beside ZooKeeper and etcd',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 16).replace('T', ' ')} UTC, one run of ${Math.round(meta.totalS ?? 0)} s: ${meta.cpu}, Node ${meta.node}; load average ${meta.loadStart} at the start and ${meta.loadEnd} at the end${meta.provisional ? ' — **provisional**: the machine was shared with other work' : ''}.`,
    '',
    `Method: one Node process drives every system with closed-loop clients (acquire then release, each client on its own name, ${meta.opts.seconds} s measured after ${meta.opts.warmup} s of warm-up per row; every system first gets ${meta.opts.systemWarmup} s of unmeasured load), the systems back to back${meta.opts.rounds > 1 ? ` for ${meta.opts.rounds} rounds, order alternating, medians by rate` : ''}. Latency is the acquire's (HDR histogram). Server CPU is utime+stime from /proc/PID/stat of every server process of the system over the window, divided by the cycles (or messages) completed in it. Sessions are kept alive at one message per session every ${meta.upkeepIntervalMs} ms on every system (ZooKeeper's pace at its smallest session timeout).`,
    '',
    ...meta.systems.map((s) => `- **${s.label}** (${s.version}): ${s.settings}.`),
    "- Locks: Fencer Acquire (wait) and Release through the router; ZooKeeper the recipe of Curator's InterProcessMutex (ephemeral sequential node, watch the predecessor; release = delete); etcd v3lock `Lock` and `Unlock` on a lease, at the leader.",
    '',
    '### Lock cycles',
    '',
    cyclesTable(meta, results),
    ...componentsTable(meta, results),
    '',
    '### Keeping sessions alive',
    '',
    upkeepTable(meta, results),
    '',
    '### Targets (issue 32)',
    '',
    markdownTable(['target', 'this run', 'Fencer / peers'], targets(meta, results), ['l', 'l', 'l']),
    '',
  ].join('\n');
}

/** The summary's rows: 64-client throughput and CPU, 1-client p50, CPU per KeepAlive; Fencer / ZooKeeper-3 / etcd-5. */
export function summaryRows(meta, results) {
  const all = (key) => meta.systems.map((s) => pick(results, key, s.key));
  const names = meta.systems.map(shortName).join(' / ');
  const rows = [];
  const row = (id, figure, key, text) => {
    const rs = all(key);
    if (rs.every(measured)) rows.push({ id, figure: `${figure}, ${names}`, value: rs.map(text).join(' / '), command: meta.command });
  };
  row('efficiency-64', 'Efficiency, through routers: 64 clients, cycles/s', 'cycles-64', (r) => int(r.rate));
  row('efficiency-cpu-64', 'Efficiency, through routers: server CPU per cycle at 64 clients (every server process)', 'cycles-64', (r) =>
    cpuText(r.cpuMsPerOp),
  );
  row('efficiency-1', 'Efficiency, through routers: 1 client, acquire p50', 'cycles-1', (r) => ms(r.p50));
  row('efficiency-upkeep', 'Efficiency: server CPU per KeepAlive (proxies) / session ping / lease keepalive', 'upkeep', (r) =>
    cpuText(r.cpuMsPerOp),
  );
  return rows;
}

/** The charts of this run: throughput, p50 and p99, CPU per cycle and per KeepAlive; { file, svg, alt } each. */
export function charts(meta, results) {
  const categories = meta.clients.map((n) => `${n}`);
  const per = (key, f) =>
    meta.systems.map((s) => ({
      name: shortName(s),
      values: key.map((k) => {
        const r = pick(results, k, s.key);
        return measured(r) ? f(r) : undefined;
      }),
    }));
  const keys = meta.clients.map((n) => `cycles-${n}`);
  const when = `${meta.date.slice(0, 10)}, load ${meta.loadStart.split(' / ')[0]}`;
  return [
    {
      file: 'efficiency-throughput.svg',
      alt: 'acquire+release cycles per second against clients',
      svg: lineChart({
        title: `Lock cycles/s by clients (${when})`,
        yLabel: 'cycles/s',
        xLabel: 'clients',
        categories,
        series: per(keys, (r) => r.rate),
      }),
    },
    {
      file: 'efficiency-p50.svg',
      alt: 'acquire p50 against clients',
      svg: lineChart({ title: `Acquire p50, ms (${when})`, yLabel: 'ms', xLabel: 'clients', categories, series: per(keys, (r) => r.p50) }),
    },
    {
      file: 'efficiency-p99.svg',
      alt: 'acquire p99 against clients',
      svg: lineChart({ title: `Acquire p99, ms (${when})`, yLabel: 'ms', xLabel: 'clients', categories, series: per(keys, (r) => r.p99) }),
    },
    {
      file: 'efficiency-cpu-cycle.svg',
      alt: 'server CPU per acquire+release cycle against clients',
      svg: barChart({
        title: `Server CPU per cycle, ms (${when})`,
        yLabel: 'CPU ms per cycle',
        xLabel: 'clients',
        categories,
        series: per(keys, (r) => r.cpuMsPerOp),
      }),
    },
    {
      file: 'efficiency-cpu-upkeep.svg',
      alt: 'server CPU per KeepAlive, session ping or lease keepalive',
      svg: barChart({
        title: `Server CPU per session upkeep message, µs (${when})`,
        yLabel: 'CPU µs per message',
        categories: ['KeepAlive / ping'],
        series: per(['upkeep'], (r) => r.cpuMsPerOp * 1000),
      }),
    },
  ];
}

/** The block at the top of docs/benchmarks.md: the targets in a line each, then the charts, two a row, from docs/charts. */
export function chartsBlock(meta, results, list) {
  const img = (c) => `<img src="charts/${c.file}" alt="${c.alt}" width="420">`;
  const lines = [];
  for (let i = 0; i < list.length; i += 2)
    lines.push(
      list
        .slice(i, i + 2)
        .map(img)
        .join(' '),
    );
  const headline = targets(meta, results).map(([target, verdict, figures]) => `- ${target}: ${verdict} (${figures}).`);
  return [
    `Fencer (through its router, with its proxy and control plane counted) beside ZooKeeper-3 and etcd-5, drawn by \`${meta.command}\` on ${meta.date.slice(0, 10)} (load average ${meta.loadStart}${meta.provisional ? '; provisional' : ''}); the tables are in [Efficiency](#efficiency-fencer-through-its-routers-beside-zookeeper-and-etcd).`,
    '',
    ...headline,
    '',
    ...lines.flatMap((l) => [l, '']),
  ].join('\n');
}
