// The benchmark's command line: one program, a subcommand per suite, the
// shared options declared once (./options.mjs). `buildProgram()` only
// declares; nothing runs until parseAsync().
import { Command } from 'commander';
import * as cell from './suites/cell.mjs';
import * as fleet from './suites/fleet.mjs';
import * as wal from './suites/wal.mjs';
import * as lockFsm from './suites/lock-fsm.mjs';
import * as duties from './suites/duties.mjs';
import * as profile from './suites/profile.mjs';
import * as snapshots from './suites/snapshots.mjs';
import * as moves from './suites/moves.mjs';
import * as failover from './suites/failover.mjs';
import * as efficiency from './suites/efficiency.mjs';
import * as fleetLoad from './suites/fleet-load.mjs';
import * as scaling from './suites/scaling.mjs';
import * as page from './suites/page.mjs';
import * as watchFanout from './suites/watch-fanout.mjs';
import * as clientDirect from './suites/client-direct.mjs';
import * as security from './suites/security.mjs';

/** Every suite, in the order --help lists them. */
const SUITES = [cell, fleet, failover, wal, lockFsm, duties, snapshots, moves, profile];
SUITES.push(efficiency);
SUITES.push(fleetLoad);
SUITES.push(scaling);
SUITES.push(watchFanout);
SUITES.push(clientDirect);
SUITES.push(security);
SUITES.unshift(page);

export function buildProgram() {
  const program = new Command('run.mjs')
    .description(
      'Fencer benchmarks: one entry, a suite per subcommand (page, every suite that writes docs/benchmarks.md, is the default). Every server runs on 127.0.0.1; ' +
        'each suite rewrites its section of docs/benchmarks.md unless --no-write.',
    )
    .showHelpAfterError()
    .addHelpText('after', () => program.commands.map((c) => `\n── ${c.name()} ──\n${c.helpInformation()}`).join(''));
  for (const suite of SUITES) suite.register(program);
  return program;
}
