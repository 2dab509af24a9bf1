/**
 * `fencer tenants move NS --to CELL [--wait]` and `fencer moves list|get ID`:
 * the control plane's move journal (docs/decisions/0019-the-move-worker.md).
 * With --wait the command follows the move to its end, printing each state
 * it reaches with the sessions and locks carried and the time since it
 * started, and exits non-zero when the move failed.
 */
import type { Command } from 'commander';
import { EXIT } from '../exit-codes.js';
import { CpError, type Ctx, type CpAction, cpOptions, out, request, table } from './control-plane.js';

interface MoveBody {
  id: string;
  namespace: string;
  fromCell: string;
  toCell: string;
  state: string;
  error?: string;
  createdAt: string;
  finishedAt?: string;
  unavailableMs?: number;
  sessions?: number;
  locks?: number;
  revision?: number;
}

const MOVE_HEADER = ['ID', 'NAMESPACE', 'FROM', 'TO', 'STATE', 'SESSIONS', 'LOCKS', 'UNAVAILABLE', 'CREATED'];
const moveRow = (m: MoveBody): string[] => [
  m.id,
  m.namespace,
  m.fromCell,
  m.toCell,
  m.error ? `${m.state}: ${m.error}` : m.state,
  String(m.sessions ?? '-'),
  String(m.locks ?? '-'),
  m.unavailableMs === undefined ? '-' : `${m.unavailableMs}ms`,
  m.createdAt,
];
const finished = (m: MoveBody): boolean => m.state === 'done' || m.state === 'failed';
/** How often --wait looks at the move. */
const WAIT_POLL_MS = 100;

/** Follows a move to its end, one line per state reached; the move as it ended. */
async function follow(ctx: Ctx, first: MoveBody): Promise<MoveBody> {
  const started = Date.now();
  let m = first;
  let shown = '';
  for (;;) {
    const line = `${((Date.now() - started) / 1000).toFixed(1)}s  ${m.state}  sessions ${m.sessions ?? '-'}  locks ${m.locks ?? '-'}`;
    if (m.state !== shown && !ctx.json) ctx.io.stdout(`${line}${m.error ? `  (${m.error})` : ''}\n`);
    shown = m.state;
    if (finished(m)) return m;
    await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
    m = (await request(ctx, 'GET', `/v1/moves/${encodeURIComponent(m.id)}`)) as MoveBody;
  }
}

const startMove: CpAction = async (ctx, namespace: string, o: { to: string; wait?: boolean }) => {
  const m = (await request(ctx, 'POST', '/v1/moves', { namespace, toCell: o.to }, true)) as MoveBody;
  if (!o.wait) return out(ctx, m, table(MOVE_HEADER, [moveRow(m)]));
  const end = await follow(ctx, m);
  out(ctx, end, table(MOVE_HEADER, [moveRow(end)]));
  if (end.state === 'failed') throw new CpError(`move ${end.id} failed: ${end.error ?? 'no reason given'}`, EXIT.ERROR);
};

export function addTenantMove(tenants: Command, action: (body: CpAction) => (...args: unknown[]) => Promise<void>): void {
  cpOptions(
    tenants
      .command('move')
      .description("move a tenant's namespace to another cell, live, with its sessions, locks and queues")
      .argument('<namespace>')
      .requiredOption('--to <cell>', 'the cell to move it to')
      .option('--wait', 'follow the move until it is done or failed, printing each state'),
  ).action(action(startMove));
}

export function addMoveCommands(program: Command, action: (body: CpAction) => (...args: unknown[]) => Promise<void>): void {
  const moves = program.command('moves').description('tenant moves and how far each got (control plane)');
  cpOptions(moves.command('list').description('every move in the journal, oldest first')).action(
    action(async (ctx) => {
      const { moves: list } = (await request(ctx, 'GET', '/v1/moves')) as { moves: MoveBody[] };
      out(ctx, { moves: list }, table(MOVE_HEADER, list.map(moveRow)));
    }),
  );
  cpOptions(moves.command('get').description('one move').argument('<id>')).action(
    action(async (ctx, id: string) => {
      const m = (await request(ctx, 'GET', `/v1/moves/${encodeURIComponent(id)}`)) as MoveBody;
      out(ctx, m, table(MOVE_HEADER, [moveRow(m)]));
    }),
  );
}
