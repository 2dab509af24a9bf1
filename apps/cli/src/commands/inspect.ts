/** `fencer get | list | watch`: the lock table as it is, and as it changes. */
import { type Command, Option } from 'commander';
import type { LockInfo, WatchEventInfo } from '@fencer/client';
import { EXIT } from '../exit-codes.js';
import { formatEvent, formatLock, formatLockRow, lockJson } from '../format.js';
import { count, print, withClient, type CliRun, type GlobalOptions } from '../run-context.js';

function addGetCommand(program: Command, run: CliRun): void {
  program
    .command('get')
    .description('show one lock: holders with their tokens, and the FIFO queue')
    .argument('<name>', 'lock name, /ls/<namespace>/<name>')
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      run.setExitCode(
        await withClient(run, g, async (c) => {
          const r = await c.getLock(name);
          print(run, g, lockJson(r.lock, r.revision), formatLock(r.lock, r.revision));
          return EXIT.OK;
        }),
      );
    });
}

function addListCommand(program: Command, run: CliRun): void {
  program
    .command('list')
    .description('list the live locks under a prefix')
    .argument('<prefix>', 'prefix inside one namespace, e.g. /ls/payments/')
    .addOption(new Option('--limit <n>', 'list at most n locks').argParser(count('--limit', 1)))
    .action(async (prefix: string, o: { limit?: number }, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      run.setExitCode(
        await withClient(run, g, async (c) => {
          const locks: LockInfo[] = [];
          for await (const l of c.listAllLocks(prefix)) {
            if (o.limit !== undefined && locks.length >= o.limit) break;
            locks.push(l);
          }
          if (g.json) for (const l of locks) run.io.stdout(`${JSON.stringify(lockJson(l))}\n`);
          else run.io.stdout(locks.length === 0 ? `no live locks under ${prefix}\n` : locks.map(formatLockRow).join(''));
          return EXIT.OK;
        }),
      );
    });
}

interface WatchFlags {
  since?: number;
  count?: number;
  progress?: boolean;
}

/** Prints events until --count of them (progress not counted) or the interrupt, which ends the watch with success. */
async function printEvents(run: CliRun, g: GlobalOptions, events: AsyncIterable<WatchEventInfo>, o: WatchFlags): Promise<number> {
  let n = 0;
  try {
    for await (const e of events) {
      if (e.type === 'progress' && !o.progress) continue;
      print(run, g, e, formatEvent(e));
      if (e.type !== 'progress' && o.count !== undefined && ++n >= o.count) break;
    }
  } catch (e) {
    if (!run.interrupt.aborted) throw e;
  }
  return EXIT.OK;
}

function addWatchCommand(program: Command, run: CliRun): void {
  program
    .command('watch')
    .description('follow the events of a lock, or of every lock under a prefix (ending in /), until interrupted')
    .argument('<nameOrPrefix>', 'lock name, or a prefix ending in /')
    .addOption(new Option('--since <revision>', 'events after this revision (default: current state first)').argParser(count('--since', 0)))
    .addOption(new Option('--count <n>', 'exit after n events (progress events not counted)').argParser(count('--count', 1)))
    .option('--progress', 'also print progress events')
    .action(async (target: string, o: WatchFlags, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      run.setExitCode(
        await withClient(run, g, (c) => printEvents(run, g, c.watch(target, { sinceRevision: o.since ?? 0, signal: run.interrupt }), o)),
      );
    });
}

/** Adds get, list and watch, in the order `fencer --help` lists them. */
export function addInspectCommands(program: Command, run: CliRun): void {
  addGetCommand(program, run);
  addListCommand(program, run);
  addWatchCommand(program, run);
}
