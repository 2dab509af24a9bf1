// The scaling suite (issue 32): aggregate lock throughput of a managed
// fleet with 1, 2 and 4 cells under the same client count, tenants spread
// over the cells, and where the machine's cores run out. Each size is a
// fresh fleet, measured alone.
import path from 'node:path';
import { chart, renderMarkdown, summaryRows } from './scaling-report.mjs';
import { FencerManagedFleet } from '../systems/fencer-managed.mjs';
import { tenantCycles } from '../load/tenant-cycles.mjs';
import { common, count, listOption, numeric, resolve } from '../options.mjs';
import { stopOnSignal } from '../processes.mjs';
import { DOC, commandLine, machineMeta, writeDocs, writeJson } from '../report.mjs';
import { writeCharts } from '../charts.mjs';

/** A run that began at a load average above this (per core) is labelled provisional. */
const QUIET_LOAD_PER_CORE = 0.5;

export function register(program) {
  const cmd = program
    .command('scaling')
    .description('aggregate lock throughput with 1, 2 and 4 cells under the same clients, and where the cores run out');
  cmd.addOption(listOption('--cells <list>', 'fleet sizes, in cells', ['1', '2', '4']));
  numeric(cmd, '--replicas <n>', 'replicas per cell', 3, 3, count);
  numeric(cmd, '--tenants <n>', 'tenants, round robin over the cells', 16, 4, count);
  numeric(cmd, '--clients <n>', 'closed-loop clients, spread over the tenants', 64, 16, count);
  numeric(cmd, '--seconds <n>', 'measured window per size', 8, 2);
  numeric(cmd, '--warmup <n>', 'unmeasured seconds of load per size before the window', 5, 1);
  cmd.option('--charts-dir <dir>', 'where the chart goes', path.join(path.dirname(DOC), 'charts'));
  common(cmd);
  cmd.action(() => runScaling(resolve(cmd)));
  return cmd;
}

async function oneSize(cells, o) {
  const fleet = new FencerManagedFleet({ cells, replicas: o.replicas, lockTenants: o.tenants, label: `Fencer, ${cells} cell(s)` });
  const stopAll = stopOnSignal([fleet]);
  try {
    process.stdout.write(`${cells} cell(s): starting … `);
    await fleet.start();
    process.stdout.write('measuring … ');
    const r = await tenantCycles(fleet, o.clients, fleet.tenants.lock, { warmupS: o.warmup, seconds: o.seconds });
    console.log(`${Math.round(r.rate)} cycles/s, machine ${(r.cpu.machineS / r.cpu.wallS).toFixed(2)} cores busy`);
    return { cells, processes: fleet.pids().length, ...r, cpu: { ...r.cpu, perPid: undefined } };
  } finally {
    await stopAll();
  }
}

export async function runScaling(o) {
  const sizes = o.cells.map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--cells ${o.cells.join(',')}: whole numbers of at least 1`);
  const meta = Object.assign(machineMeta(), { command: commandLine(), opts: o });
  meta.provisional = Number(meta.loadStart.split(' / ')[0]) > QUIET_LOAD_PER_CORE * meta.cores;
  const rows = [];
  for (const cells of sizes) rows.push(await oneSize(cells, o).catch((e) => ({ cells, error: e?.stack ?? String(e) })));
  meta.end();
  const body = renderMarkdown(meta, rows);
  console.log(body);
  if (o.json) writeJson(o.json, { meta, rows });
  if (!o.write) return;
  writeCharts(o.chartsDir, [chart(meta, rows)]);
  writeDocs({ name: 'scaling', body, rows: summaryRows(meta, rows), keepNotes: true });
}
