/**
 * `fencer cell status`: each replica's role, term, log indexes and
 * replication lag, from the admin API of every endpoint given, one table per
 * cell (each with its own leader, whose view gives its replicas' lag);
 * `--cell ID` shows that cell only. A replica whose cell is unknown (given
 * by address, not answering) joins the table of the only cell there is, or
 * a table of its own when there are several. Exits 69 when no replica
 * answered.
 */
import type { adminpb } from '@fencer/protocol';
import type { ChannelCredentials } from '@grpc/grpc-js';
import { EXIT } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { adminCall, leaderAmong, statusTimeoutMs } from './cell-admin.js';
import { cellsOf, replicasOfCell } from './cell-scope.js';

interface ReplicaRow {
  id: string;
  cellId: string;
  admin: string;
  reachable: boolean;
  status?: adminpb.StatusResponse;
  lag?: number;
}

interface CellTable {
  /** '' for replicas whose cell nobody could say. */
  readonly cellId: string;
  readonly rows: ReplicaRow[];
  readonly leader: ReplicaRow | undefined;
}

/** One row per admin endpoint, its cell as the replica says it, else as the fleet description does. */
async function statusRows(
  replicas: readonly { id: string; admin: string; cellId: string }[],
  timeoutMs: number,
  creds: ChannelCredentials,
): Promise<ReplicaRow[]> {
  const answers = await Promise.all(
    replicas.map((r) =>
      adminCall<adminpb.StatusResponse>(r.admin, 'status', {}, Math.min(timeoutMs, statusTimeoutMs), creds).catch(() => undefined),
    ),
  );
  return replicas.map((r, i) => {
    const s = answers[i];
    return {
      id: s?.nodeId || r.id,
      cellId: s?.cellId || r.cellId,
      admin: r.admin,
      reachable: s !== undefined,
      ...(s ? { status: s } : {}),
    };
  });
}

/** The rows by cell, each with its leader and each replica's lag as that leader sees it (last index − match index). */
function byCell(rows: readonly ReplicaRow[]): CellTable[] {
  const cells = cellsOf(rows);
  // Rows of no known cell join the only cell there is; with several cells they cannot be placed, and form their own table.
  const cellOf = (r: ReplicaRow): string => (r.cellId === '' && cells.length === 1 ? cells[0]! : r.cellId);
  const ids = [...new Set(rows.map(cellOf))];
  return ids.map((cellId) => {
    const mine = rows.filter((r) => cellOf(r) === cellId);
    const leader = leaderAmong(mine);
    for (const r of mine) {
      const m = leader?.status?.members.find((x) => x.id === r.id);
      if (m) r.lag = m.state === 'self' ? 0 : m.lag;
      else if (r === leader) r.lag = 0;
    }
    return { cellId, rows: mine, leader };
  });
}

function rowJson(r: ReplicaRow): Record<string, unknown> {
  return {
    id: r.id,
    cellId: r.cellId,
    admin: r.admin,
    reachable: r.reachable,
    role: r.status?.role ?? null,
    term: r.status?.term ?? null,
    leaderId: r.status?.leaderId ?? null,
    commitIndex: r.status?.commitIndex ?? null,
    appliedIndex: r.status?.appliedIndex ?? null,
    lastIndex: r.status?.lastIndex ?? null,
    snapshotIndex: r.status?.snapshotIndex ?? null,
    lag: r.lag ?? null,
  };
}

/** `cells`, one entry per table; the top-level leaderId, term and replicas are the single cell's (null leader with several). */
function statusJson(tables: readonly CellTable[]): string {
  const one = tables.length === 1 ? tables[0] : undefined;
  return `${JSON.stringify({
    leaderId: one?.leader?.status?.nodeId ?? null,
    term: one?.leader?.status?.term ?? null,
    replicas: tables.flatMap((t) => t.rows.map(rowJson)),
    cells: tables.map((t) => ({
      cellId: t.cellId || null,
      leaderId: t.leader?.status?.nodeId ?? null,
      term: t.leader?.status?.term ?? null,
      replicas: t.rows.map(rowJson),
    })),
  })}\n`;
}

function statusTable({ cellId, rows, leader }: CellTable): string {
  let text = `${cellId ? `cell ${cellId}  ` : 'cell unknown  '}${leader ? `leader ${leader.id} (term ${leader.status!.term})` : 'no leader reachable'}\n`;
  const header = ['replica', 'role', 'term', 'commit', 'applied', 'last', 'lag'];
  const table = rows.map((r) =>
    r.status
      ? [
          r.id,
          r.status.role,
          String(r.status.term),
          String(r.status.commitIndex),
          String(r.status.appliedIndex),
          String(r.status.lastIndex),
          r.lag === undefined ? '?' : String(r.lag),
        ]
      : [r.id, 'unreachable', '', '', '', '', ''],
  );
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => (row[i] as string).length)));
  for (const row of [header, ...table])
    text += `${row
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd()}\n`;
  return text;
}

export async function cellStatus(
  replicas: readonly { id: string; admin: string; cellId: string }[],
  o: { timeoutMs: number; json: boolean; cell?: string | undefined; credentials: ChannelCredentials },
  io: CliIo,
): Promise<number> {
  const all = await statusRows(replicas, o.timeoutMs, o.credentials);
  const rows = o.cell === undefined ? all : replicasOfCell(all, o.cell);
  const tables = byCell(rows);
  io.stdout(o.json ? statusJson(tables) : tables.map(statusTable).join('\n'));
  return rows.some((r) => r.reachable) ? EXIT.OK : EXIT.UNAVAILABLE;
}
