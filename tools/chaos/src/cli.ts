#!/usr/bin/env node
/**
 * `npm run chaos -- --seconds S [--seed X]`: one chaos run against a local
 * five-replica cell. Prints the figures; on a violation it prints the
 * history, the fault schedule and the command that reruns the seed, and
 * exits 1.
 */
import { randomInt } from 'node:crypto';
import { Command, InvalidArgumentError } from 'commander';
import { type NemesisMode, runChaos, summarize } from './run.js';

const int = (what: string) => (v: string): number => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${what} must be a non-negative integer`);
  return n;
};

const program = new Command('fencer-chaos')
  .description('Chaos run against a real five-replica cell: faults, workloads, history checkers.')
  .option('--seconds <s>', 'how long the nemesis runs', int('--seconds'), 60)
  .option('--seed <x>', 'seed of the fault schedule and the workloads', int('--seed'))
  .option('--no-fence', 'the negative control: the resource accepts every token (the checker must flag it)')
  .option('--nemesis <mode>', 'full | client-pauses | none', 'full')
  .option('--snapshot-every-entries <n>', 'snapshot and compact the log every n entries (default: never within a run)', int('--snapshot-every-entries'))
  .option('--work-dir <dir>', 'where data, logs, history and the report go (default: a new temporary directory)')
  .allowExcessArguments(false);
program.parse(process.argv.slice(2), { from: 'user' });
const o = program.opts<{ seconds: number; seed?: number; fence: boolean; nemesis: string; snapshotEveryEntries?: number; workDir?: string }>();
if (!['full', 'client-pauses', 'none'].includes(o.nemesis)) {
  console.error(`--nemesis must be full, client-pauses or none, got "${o.nemesis}"`);
  process.exit(2);
}
const seed = o.seed ?? randomInt(1, 2 ** 31);
const report = await runChaos({
  seconds: o.seconds,
  seed,
  fence: o.fence,
  nemesis: o.nemesis as NemesisMode,
  ...(o.snapshotEveryEntries !== undefined ? { snapshotEveryEntries: o.snapshotEveryEntries } : {}),
  ...(o.workDir ? { workDir: o.workDir } : {}),
});
console.log(summarize(report));
process.exit(report.ok ? 0 : 1);
