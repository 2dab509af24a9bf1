// The page suite, the default of `npm run bench`: one command that
// reproduces docs/benchmarks.md, running every suite that writes it, one
// after another, each in its own process with its defaults (so one suite's
// servers and signal handlers never meet another's). The suites whose
// figures make the summary and the charts at the top run first. A suite
// that fails is reported and the next one runs; the exit status says
// whether all succeeded.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listOption } from '../options.mjs';

/** Every suite that writes docs/benchmarks.md, the summary's and charts' first. */
export const PAGE_SUITES = [
  'efficiency',
  'fleet-load',
  'scaling',
  'cell',
  'fleet',
  'failover',
  'wal',
  'lock-fsm',
  'duties',
  'snapshots',
  'moves',
  'watch-fanout',
  'client-direct',
  'security',
];
/** Suites without a --quick preset. */
const NO_QUICK = new Set(['duties']);
const RUN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../run.mjs');

export function register(program) {
  const cmd = program
    .command('page', { isDefault: true })
    .description('every suite that writes docs/benchmarks.md, one after another with its defaults (the default of npm run bench)')
    .addOption(listOption('--suites <list>', 'the suites to run, in this order', PAGE_SUITES))
    .option('--quick', 'pass --quick to every suite that has it (a smoke run of the whole page)')
    .option('--no-write', 'pass --no-write to every suite');
  cmd.action(() => runPage(cmd.opts()));
  return cmd;
}

/** The argument list of one suite's run. */
export function suiteArgs(suite, { quick, write }) {
  return [suite, ...(quick && !NO_QUICK.has(suite) ? ['--quick'] : []), ...(write === false ? ['--no-write'] : [])];
}

function runOne(args, forward) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [RUN, ...args], { stdio: 'inherit' });
    forward.child = child;
    child.on('exit', (code, signal) => resolve(signal ? `ended by ${signal}` : code === 0 ? 'ok' : `exit ${code}`));
    child.on('error', (e) => resolve(`not started: ${e.message}`));
  });
}

export async function runPage(o) {
  const unknown = o.suites.filter((s) => !PAGE_SUITES.includes(s));
  if (unknown.length) throw new Error(`--suites ${unknown.join(',')}: use ${PAGE_SUITES.join(', ')}`);
  const forward = { child: undefined, stopped: false };
  // A signal goes to the suite running now (by its PID), which stops what it started; no later suite starts.
  const onSignal = (sig) => {
    forward.stopped = true;
    forward.child?.kill(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const outcomes = [];
  for (const suite of o.suites) {
    if (forward.stopped) break;
    const args = suiteArgs(suite, o);
    console.log(`\n══ node tools/bench/run.mjs ${args.join(' ')} ══`);
    const t0 = Date.now();
    outcomes.push({ suite, outcome: await runOne(args, forward), s: (Date.now() - t0) / 1000 });
  }
  console.log(`\n${outcomes.map((r) => `${r.suite.padEnd(12)} ${r.outcome} (${Math.round(r.s)} s)`).join('\n')}`);
  if (outcomes.some((r) => r.outcome !== 'ok') || forward.stopped) process.exitCode = 1;
}
