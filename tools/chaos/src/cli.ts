#!/usr/bin/env node
/**
 * `npm run chaos -- --seconds S [--seed X]`: one chaos run against a local
 * five-replica cell (`--mode moves`: two cells and a meta group, tenants
 * moved back and forth; `--nemesis none` there moves without faults). Prints the figures; on a violation it prints the
 * history, the fault schedule and the command that reruns the seed, and
 * exits 1.
 */
import { randomInt } from 'node:crypto';
import { Command, InvalidArgumentError } from 'commander';
import { type NemesisMode, runChaos, summarize } from './run.js';
import { CHAOS_BUGS, type ChaosBug } from './cell.js';
import { isFaultKind, type ScheduledFault } from './nemesis.js';
import { runMovesChaos, summarizeMoves } from './moves-run.js';
import { MOVES_BUGS, type MovesBug } from './moves-fleet.js';

const int =
  (what: string) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${what} must be a non-negative integer`);
    return n;
  };

function parseSchedule(v: string): ScheduledFault[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch (err) {
    throw new InvalidArgumentError(`--schedule must be JSON: ${(err as Error).message}`);
  }
  const ok = (f: unknown): f is ScheduledFault =>
    typeof f === 'object' &&
    f !== null &&
    Number.isSafeInteger((f as ScheduledFault).atMs) &&
    (f as ScheduledFault).atMs >= 0 &&
    isFaultKind(String((f as ScheduledFault).kind));
  if (!Array.isArray(parsed) || !parsed.every(ok))
    throw new InvalidArgumentError('--schedule must be a JSON array of {"atMs": <ms after the start>, "kind": <fault kind>}');
  return parsed;
}

const program = new Command('fencer-chaos')
  .description('Chaos run against a real five-replica cell: faults, workloads, history checkers.')
  .option('--mode <mode>', 'cell: one five-replica cell | moves: two cells and a meta group, tenants moved back and forth', 'cell')
  .option('--seconds <s>', 'how long the nemesis runs', int('--seconds'), 60)
  .option('--seed <x>', 'seed of the fault schedule and the workloads', int('--seed'))
  .option('--no-fence', 'the negative control: the resource accepts every token (the checker must flag it)')
  .option('--nemesis <mode>', 'full | soak (full plus clock-rate skew and fiu disk faults) | client-pauses | none', 'full')
  .option('--client-clock-rate <r>', 'run the last client worker under faketime at this clock rate (e.g. 0.5 or 2)', (v: string) => {
    const n = Number(v);
    if (!(n > 0 && n <= 10)) throw new InvalidArgumentError('--client-clock-rate must be a number in (0, 10]');
    return n;
  })
  .option(
    '--bug <name>',
    `plant a cell bug the checkers must catch: ${CHAOS_BUGS.join(' | ')}; in the moves mode ${MOVES_BUGS.join(' | ')}`,
  )
  .option('--weights <json>', "the nemesis's fault weights as JSON, replacing the mode's (e.g. '{\"partition\":1}')")
  .option(
    '--schedule <json>',
    'faults at fixed times instead of drawn, as JSON (e.g. \'[{"atMs":4000,"kind":"lagging-follower"}]\')',
    parseSchedule,
  )
  .option(
    '--snapshot-every-entries <n>',
    'snapshot and compact the log every n entries (default: never within a run)',
    int('--snapshot-every-entries'),
  )
  .option('--nemesis-interval-ms <lo,hi>', 'milliseconds between fault starts, as a range (default: 1500,4000)', (v: string) => {
    const r = v.split(',').map(Number);
    if (r.length !== 2 || !r.every((n) => Number.isSafeInteger(n)) || !(r[0]! > 0 && r[0]! <= r[1]!))
      throw new InvalidArgumentError('--nemesis-interval-ms must be two integers lo,hi with 0 < lo <= hi');
    return [r[0]!, r[1]!] as const;
  })
  .option('--work-dir <dir>', 'where data, logs, history and the report go (default: a new temporary directory)')
  .allowExcessArguments(false);
program.parse(process.argv.slice(2), { from: 'user' });
const o = program.opts<{
  mode: string;
  seconds: number;
  seed?: number;
  fence: boolean;
  nemesis: string;
  bug?: string;
  weights?: string;
  schedule?: ScheduledFault[];
  clientClockRate?: number;
  snapshotEveryEntries?: number;
  nemesisIntervalMs?: readonly [number, number];
  workDir?: string;
}>();
if (o.mode !== 'cell' && o.mode !== 'moves') {
  console.error(`--mode must be cell or moves, got "${o.mode}"`);
  process.exit(2);
}
if (o.mode === 'moves') {
  if (o.bug !== undefined && !(MOVES_BUGS as readonly string[]).includes(o.bug)) {
    console.error(`--bug in the moves mode must be one of ${MOVES_BUGS.join(', ')}, got "${o.bug}"`);
    process.exit(2);
  }
  const moves = await runMovesChaos({
    seconds: o.seconds,
    seed: o.seed ?? randomInt(1, 2 ** 31),
    ...(o.bug !== undefined ? { bug: o.bug as MovesBug } : {}),
    ...(o.nemesis === 'none' ? { faults: [] } : {}),
    ...(o.workDir ? { workDir: o.workDir } : {}),
  });
  console.log(summarizeMoves(moves));
  process.exit(moves.ok ? 0 : 1);
}
if (!['full', 'soak', 'client-pauses', 'none'].includes(o.nemesis)) {
  console.error(`--nemesis must be full, soak, client-pauses or none, got "${o.nemesis}"`);
  process.exit(2);
}
if (o.bug !== undefined && !(CHAOS_BUGS as readonly string[]).includes(o.bug)) {
  console.error(`--bug must be one of ${CHAOS_BUGS.join(', ')}, got "${o.bug}"`);
  process.exit(2);
}
let weights: Record<string, number> | undefined;
try {
  weights = o.weights === undefined ? undefined : (JSON.parse(o.weights) as Record<string, number>);
} catch (err) {
  console.error(`--weights must be a JSON object of fault kinds to weights: ${(err as Error).message}`);
  process.exit(2);
}
const seed = o.seed ?? randomInt(1, 2 ** 31);
const report = await runChaos({
  seconds: o.seconds,
  seed,
  fence: o.fence,
  nemesis: o.nemesis as NemesisMode,
  ...(o.bug !== undefined ? { bug: o.bug as ChaosBug } : {}),
  ...(o.clientClockRate !== undefined ? { clientClockRate: o.clientClockRate } : {}),
  ...(weights !== undefined ? { weights } : {}),
  ...(o.schedule !== undefined ? { schedule: o.schedule } : {}),
  ...(o.snapshotEveryEntries !== undefined ? { snapshotEveryEntries: o.snapshotEveryEntries } : {}),
  ...(o.nemesisIntervalMs !== undefined ? { nemesisIntervalMs: o.nemesisIntervalMs } : {}),
  ...(o.workDir ? { workDir: o.workDir } : {}),
});
console.log(summarize(report));
process.exit(report.ok ? 0 : 1);
