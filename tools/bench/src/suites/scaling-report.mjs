// The scaling suite's report, pure: aggregate lock throughput by cells,
// where the machine's cores run out, the section of docs/benchmarks.md,
// its summary row and its chart.
import { lineChart } from '../charts.mjs';
import { fmt, markdownTable } from '../report.mjs';

const { int, ms } = fmt;
/** The machine counts as out of cores when its busy share reaches this. */
export const SATURATED_SHARE = 0.9;
/** A step of cells that adds less than this share of throughput is no longer scaling. */
export const GAIN_MIN = 0.1;

const ok = (r) => r && !r.error && r.rate > 0;

/**
 * Where the cores run out: the first row whose machine was at least
 * SATURATED_SHARE busy, and the first step that gained less than GAIN_MIN
 * over the row before. Rows are in order of cells.
 */
export function whereCoresRunOut(rows, cores) {
  const measured = rows.filter(ok);
  const saturated = measured.find((r) => r.cpu.machineS / r.cpu.wallS >= SATURATED_SHARE * cores);
  let flat;
  for (let i = 1; i < measured.length && !flat; i++) if (measured[i].rate < (1 + GAIN_MIN) * measured[i - 1].rate) flat = measured[i];
  return { saturatedAt: saturated?.cells, flatAt: flat?.cells };
}

function verdict(rows, cores) {
  const { saturatedAt, flatAt } = whereCoresRunOut(rows, cores);
  const sat =
    saturatedAt === undefined
      ? `the machine stayed below ${Math.round(SATURATED_SHARE * 100)}% busy at every size`
      : `the machine's ${cores} cores were at least ${Math.round(SATURATED_SHARE * 100)}% busy from ${saturatedAt} cell${saturatedAt > 1 ? 's' : ''}`;
  const flat =
    flatAt === undefined
      ? 'throughput grew by at least 10% with every step of cells'
      : `throughput stopped growing (less than +${Math.round(GAIN_MIN * 100)}%) at ${flatAt} cells`;
  const others = rows.filter(ok).some((r) => r.cpu.serverS + r.cpu.loadgenS < 0.5 * r.cpu.machineS);
  const mind = others
    ? ' Other work took more than half of the busy CPU in some rows: there the machine ran out of cores for reasons outside this fleet, and the ratios are a floor.'
    : '';
  return `Where the cores run out: ${sat}; ${flat}.${mind}`;
}

export function renderMarkdown(meta, rows) {
  const base = rows.find(ok);
  const table = rows.map((r) =>
    ok(r)
      ? [
          r.cells,
          r.processes,
          int(r.rate),
          base ? `${(r.rate / base.rate).toFixed(2)}×` : '—',
          `${ms(r.p50)} / ${ms(r.p99)}`,
          (r.cpu.serverS / r.cpu.wallS).toFixed(2),
          (r.cpu.loadgenS / r.cpu.wallS).toFixed(2),
          (r.cpu.machineS / r.cpu.wallS).toFixed(2),
          `${((r.cpu.serverS * 1000) / r.ops).toFixed(2)} ms`,
        ]
      : [r.cells, r.processes ?? '', `error: ${String(r.error).split('\n')[0]}`, '', '', '', '', '', ''],
  );
  return [
    '## Scaling by cells',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 16).replace('T', ' ')} UTC: ${meta.cpu}, Node ${meta.node}; load average ${meta.loadStart} at the start and ${meta.loadEnd} at the end${meta.provisional ? ' — **provisional**: the machine was shared with other work' : ''}.`,
    '',
    `One fresh managed fleet per size (cells of ${meta.opts.replicas} replicas, one control-plane instance, one router; ${meta.opts.tenants} tenants placed round robin over the cells), each under the same ${meta.opts.clients} closed-loop clients spread over the tenants (client i in tenant i mod ${meta.opts.tenants}, acquire+release on its own name through the router): ${meta.opts.seconds} s measured after ${meta.opts.warmup} s of warm-up. CPU in cores over the window: every server process, the load generator (this process), and the whole machine (all of its work, others' included).`,
    '',
    markdownTable(
      [
        'cells',
        'server processes',
        'cycles/s',
        'against 1 cell',
        'acquire p50 / p99',
        'CPU servers',
        'CPU load generator',
        'CPU machine',
        'server CPU per cycle',
      ],
      table,
    ),
    '',
    verdict(rows, meta.cores),
    '',
    '<img src="charts/scaling-throughput.svg" alt="lock cycles per second by cells" width="420">',
    '',
  ].join('\n');
}

export function summaryRows(meta, rows) {
  const m = rows.filter(ok);
  if (m.length < 2) return [];
  return [
    {
      id: 'scaling-cells',
      figure: `Scaling: lock cycles/s with ${m.map((r) => r.cells).join(' / ')} cells, ${meta.opts.clients} clients`,
      value: m.map((r) => int(r.rate)).join(' / '),
      command: meta.command,
    },
  ];
}

export function chart(meta, rows) {
  return {
    file: 'scaling-throughput.svg',
    svg: lineChart({
      title: `Lock cycles/s by cells, ${meta.opts.clients} clients (${meta.date.slice(0, 10)}, load ${meta.loadStart.split(' / ')[0]})`,
      yLabel: 'cycles/s',
      xLabel: 'cells',
      categories: rows.map((r) => String(r.cells)),
      series: [{ name: 'Fencer', values: rows.map((r) => (ok(r) ? r.rate : undefined)) }],
    }),
  };
}
