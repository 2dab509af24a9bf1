/**
 * `fencer cell status`: each replica's role, term, log indexes and
 * replication lag, from the admin API of every endpoint given. Exits 69
 * when no replica answered.
 */
import type { adminpb } from '@fencer/protocol';
import { EXIT } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { adminCall, leaderAmong, statusTimeoutMs } from './cell-admin.js';

interface ReplicaRow {
  id: string;
  cellId: string;
  admin: string;
  reachable: boolean;
  status?: adminpb.StatusResponse;
  lag?: number;
}

/** One row per admin endpoint, each replica's lag as the leader sees it (its last index minus the member's match index). */
async function statusRows(
  replicas: readonly { id: string; admin: string; cellId: string }[],
  timeoutMs: number,
): Promise<{ rows: ReplicaRow[]; leader: ReplicaRow | undefined }> {
  const answers = await Promise.all(
    replicas.map((r) =>
      adminCall<adminpb.StatusResponse>(r.admin, 'status', {}, Math.min(timeoutMs, statusTimeoutMs)).catch(() => undefined),
    ),
  );
  const rows: ReplicaRow[] = replicas.map((r, i) => {
    const s = answers[i];
    return {
      id: s?.nodeId || r.id,
      cellId: s?.cellId || r.cellId,
      admin: r.admin,
      reachable: s !== undefined,
      ...(s ? { status: s } : {}),
    };
  });
  const leader = leaderAmong(rows);
  for (const r of rows) {
    const m = leader?.status?.members.find((x) => x.id === r.id);
    if (m) r.lag = m.state === 'self' ? 0 : m.lag;
    else if (r === leader) r.lag = 0;
  }
  return { rows, leader };
}

function statusJson(rows: readonly ReplicaRow[], leader: ReplicaRow | undefined): string {
  return `${JSON.stringify({
    leaderId: leader?.status?.nodeId ?? null,
    term: leader?.status?.term ?? null,
    replicas: rows.map((r) => ({
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
    })),
  })}\n`;
}

function statusTable(rows: readonly ReplicaRow[], leader: ReplicaRow | undefined): string {
  const cellIds = [...new Set(rows.map((r) => r.cellId).filter((c) => c !== ''))];
  let text = `${cellIds.length ? `cell ${cellIds.join(', ')}  ` : ''}${leader ? `leader ${leader.id} (term ${leader.status!.term})` : 'no leader reachable'}\n`;
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
  o: { timeoutMs: number; json: boolean },
  io: CliIo,
): Promise<number> {
  const { rows, leader } = await statusRows(replicas, o.timeoutMs);
  io.stdout(o.json ? statusJson(rows, leader) : statusTable(rows, leader));
  return rows.some((r) => r.reachable) ? EXIT.OK : EXIT.UNAVAILABLE;
}
