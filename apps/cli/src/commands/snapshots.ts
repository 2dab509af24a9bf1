/**
 * `fencer snapshots take|list|get --cell ID`: a cell's snapshots in object
 * storage, through the control plane's catalogue
 * (POST/GET /v1/cells/{cell}/snapshots). `take` asks for one and, unless
 * --no-wait, waits until the control plane has uploaded it (done) or given
 * up (failed). `fencer cell snapshot` stays the local command: a snapshot on
 * one replica's disk, nothing uploaded.
 */
import type { Command } from 'commander';
import { EXIT } from '../exit-codes.js';
import { CpError, cpOptions, out, request, table, type cpActions, type Ctx } from './control-plane.js';

interface SnapshotBody {
  id: string;
  cell: string;
  state: 'uploading' | 'done' | 'failed';
  createdAt: string;
  index?: number;
  bytes?: number;
  sha256?: string;
  location?: string;
  error?: string;
}

const HEADER = ['ID', 'STATE', 'INDEX', 'BYTES', 'CREATED', 'LOCATION'];
const row = (s: SnapshotBody): string[] => [
  s.id,
  s.state,
  s.index === undefined ? '-' : String(s.index),
  s.bytes === undefined ? '-' : String(s.bytes),
  s.createdAt,
  s.location ?? (s.error !== undefined ? `error: ${s.error}` : '-'),
];
const path = (cell: string, id?: string): string =>
  `/v1/cells/${encodeURIComponent(cell)}/snapshots${id === undefined ? '' : `/${encodeURIComponent(id)}`}`;

/** How often `take` looks whether the upload finished. */
const POLL_MS = 250;

async function take(ctx: Ctx, o: { cell: string; wait: boolean }): Promise<void> {
  let s = (await request(ctx, 'POST', path(o.cell), undefined, true)) as SnapshotBody;
  const untilMs = Date.now() + ctx.timeoutMs;
  while (o.wait && s.state === 'uploading') {
    if (Date.now() > untilMs)
      throw new CpError(
        `snapshot ${s.id} is still uploading after ${ctx.timeoutMs} ms; follow it with fencer snapshots get`,
        EXIT.UNAVAILABLE,
      );
    await new Promise((r) => setTimeout(r, POLL_MS));
    s = (await request(ctx, 'GET', path(o.cell, s.id))) as SnapshotBody;
  }
  out(ctx, s, table(HEADER, [row(s)]));
  if (s.state === 'failed') throw new CpError(`snapshot ${s.id} failed: ${s.error ?? 'no reason given'}`, EXIT.ERROR);
}

export function addSnapshotCommands(program: Command, action: ReturnType<typeof cpActions>): void {
  const snapshots = program.command('snapshots').description("a cell's snapshots in object storage (control plane)");
  cpOptions(
    snapshots
      .command('take')
      .description('snapshot the cell now and upload it; waits until it is done or failed')
      .requiredOption('--cell <id>', 'the cell')
      .option('--no-wait', 'answer as soon as it is recorded (state uploading)'),
  ).action(action(take));
  cpOptions(snapshots.command('list').description("the cell's snapshots, newest first").requiredOption('--cell <id>', 'the cell')).action(
    action(async (ctx, o: { cell: string }) => {
      const { snapshots: list } = (await request(ctx, 'GET', path(o.cell))) as { snapshots: SnapshotBody[] };
      out(ctx, { snapshots: list }, table(HEADER, list.map(row)));
    }),
  );
  cpOptions(snapshots.command('get').description('one snapshot').argument('<id>').requiredOption('--cell <id>', 'the cell')).action(
    action(async (ctx, id: string, o: { cell: string }) => {
      const s = (await request(ctx, 'GET', path(o.cell, id))) as SnapshotBody;
      out(ctx, s, `${table(HEADER, [row(s)])}${s.sha256 ? `sha256 ${s.sha256}\n` : ''}`);
    }),
  );
}
