/**
 * `fencer cell …`: the admin API's status, membership and maintenance commands (cell-status.ts, cell-admin.ts), and
 * `fencer cell restore`, which builds a cell's data folders from an object-store snapshot (cell-restore.ts). Every one
 * takes --cell ID: status shows each cell in a table of its own (or that one), and a change on endpoints that span
 * several cells requires it (cell-scope.ts).
 */
import { type Command, Option } from 'commander';
import { resolveAdminEndpoints } from '../config.js';
import { adminCredentialsOf, type CliRun, type GlobalOptions } from '../run-context.js';
import { addMember, promoteLearner, removeMember, takeSnapshot, transferLeader } from './cell-admin.js';
import { cellStatus } from './cell-status.js';
import { scopeForChange } from './cell-scope.js';
import { addRestoreCommand } from './cell-restore.js';

const ADMIN_FLAGS = '--admin <list>';
const ADMIN_HELP = 'admin endpoints, host:port[,…] (default: $FENCER_ADMIN_ENDPOINTS, then the fleet description)';

const CELL_FLAGS = '--cell <id>';
const CELL_CHANGE_HELP = 'the cell to change (required when the admin endpoints span several cells)';

const adminOption = (): Option => new Option(ADMIN_FLAGS, ADMIN_HELP);
const cellOption = (): Option => new Option(CELL_FLAGS, CELL_CHANGE_HELP);

interface AdminOptions {
  admin?: string;
  cell?: string;
}

/** The admin endpoints of the one cell a change applies to (cell-scope.ts), and the global options, as cell-admin.ts takes them. */
async function adminCtxOf(run: CliRun, o: AdminOptions, cmd: Command, scoped = true) {
  const g = cmd.optsWithGlobals<GlobalOptions>();
  const all = resolveAdminEndpoints(o.admin, g, run.io.env, run.io.cwd);
  const credentials = adminCredentialsOf(run.io.env, g);
  const replicas = scoped || o.cell !== undefined ? await scopeForChange(all, o.cell, g.timeout, credentials) : all;
  return { replicas, credentials, timeoutMs: g.timeout, json: g.json === true, io: run.io };
}

function addStatusCommand(cell: Command, run: CliRun): void {
  cell
    .command('status')
    .description("each replica's role, term, log indexes and replication lag (admin API), one table per cell")
    .option(ADMIN_FLAGS, ADMIN_HELP)
    .option(CELL_FLAGS, 'this cell only')
    .action(async (o: AdminOptions, cmd: Command) => {
      const g = cmd.optsWithGlobals<GlobalOptions>();
      const replicas = resolveAdminEndpoints(o.admin, g, run.io.env, run.io.cwd);
      const credentials = adminCredentialsOf(run.io.env, g);
      run.setExitCode(await cellStatus(replicas, { timeoutMs: g.timeout, json: g.json === true, cell: o.cell, credentials }, run.io));
    });
}

function addMembershipCommands(cell: Command, run: CliRun): void {
  cell
    .command('add-member')
    .description(
      'add a replica to the cell, one at a time: its addresses are replicated first, then the membership change (a learner catches up without voting; promote it after)',
    )
    .argument('<id>', "the new member's node id (its --id)")
    .argument('<address>', 'its lock-service gRPC address, host:port (its --listen)')
    .option('--learner', 'join as a non-voting learner (recommended: promote once it has caught up)')
    .option('--peer-address <host:port>', "its Raft peer address (its --peer-listen; default: the gRPC port + the cell's peer port offset)")
    .addOption(cellOption())
    .addOption(adminOption())
    .action(async (id: string, address: string, o: { learner?: boolean; peerAddress?: string } & AdminOptions, cmd: Command) => {
      run.setExitCode(await addMember(await adminCtxOf(run, o, cmd), id, address, o));
    });
  for (const [name, description, change] of [
    ['remove-member', 'remove a replica from the cell', removeMember],
    ['promote', 'make a learner a voter', promoteLearner],
  ] as const) {
    cell
      .command(name)
      .description(description)
      .argument('<id>', "the member's node id")
      .addOption(cellOption())
      .addOption(adminOption())
      .action(async (id: string, o: AdminOptions, cmd: Command) => {
        run.setExitCode(await change(await adminCtxOf(run, o, cmd), id));
      });
  }
}

function addMaintenanceCommands(cell: Command, run: CliRun): void {
  cell
    .command('transfer-leader')
    .description('hand leadership to a voter (default: the most up-to-date one), as before maintenance of the leader')
    .argument('[id]', 'the voter to lead next')
    .addOption(cellOption())
    .addOption(adminOption())
    .action(async (id: string | undefined, o: AdminOptions, cmd: Command) => {
      run.setExitCode(await transferLeader(await adminCtxOf(run, o, cmd), id));
    });
  cell
    .command('snapshot')
    .description('take a snapshot now and compact the log below it')
    .option('--replica <id>', 'on this replica (default: the leader)')
    .addOption(new Option(CELL_FLAGS, 'the cell whose leader takes it (required without --replica when the endpoints span several cells)'))
    .addOption(adminOption())
    .action(async (o: { replica?: string } & AdminOptions, cmd: Command) => {
      // A replica named by id needs no cell to find it; the leader does.
      run.setExitCode(await takeSnapshot(await adminCtxOf(run, o, cmd, o.replica === undefined), o.replica));
    });
}

/** Adds `fencer cell` and its subcommands, in the order `fencer cell --help` lists them. */
export function addCellCommands(program: Command, run: CliRun): void {
  const cell = program.command('cell').description('cell operations');
  addStatusCommand(cell, run);
  addMembershipCommands(cell, run);
  addMaintenanceCommands(cell, run);
  addRestoreCommand(cell, run);
}
