/** Human output: one line per fact, aligned columns, nothing a script should parse (use --json). */
import type { LockInfo, WatchEventInfo } from '@fencer/client';

function shortSession(id: string): string {
  return id.length > 24 ? `${id.slice(0, 23)}…` : id;
}

export function formatLock(lock: LockInfo, revision?: number): string {
  const at = revision === undefined ? '' : ` (revision ${revision})`;
  const lines: string[] = [];
  if (lock.holders.length === 0) lines.push(`${lock.name}: free${lock.delayed ? ', held back by a lock-delay' : ''}${at}`);
  else lines.push(`${lock.name}: held ${lock.mode}${lock.delayed ? ', lock-delay pending' : ''}${at}`);
  for (const h of lock.holders)
    lines.push(`  holder  token ${h.token}  ${h.mode.padEnd(9)}  client ${h.clientId || '-'}  session ${shortSession(h.sessionId)}`);
  lock.waiters.forEach((w, i) =>
    lines.push(`  waiter  #${i + 1}  ${w.mode.padEnd(9)}  client ${w.clientId || '-'}  session ${shortSession(w.sessionId)}`),
  );
  return `${lines.join('\n')}\n`;
}

export function formatLockRow(lock: LockInfo): string {
  const tokens = lock.holders.map((h) => h.token).join(',') || '-';
  return `${lock.name}  ${lock.mode.padEnd(9)}  holders ${lock.holders.length} (tokens ${tokens})  waiters ${lock.waiters.length}\n`;
}

export function formatEvent(e: WatchEventInfo): string {
  switch (e.type) {
    case 'progress':
      return `${e.revision}  progress\n`;
    case 'resync':
      return `${e.revision}  resync (history compacted: current state follows)\n`;
    case 'snapshot':
      return `${e.revision}  snapshot  ${e.name}  ${e.lock ? `${e.lock.mode}, holders ${e.lock.holders.map((h) => h.token).join(',') || '-'}, waiters ${e.lock.waiters.length}` : ''}\n`;
    default:
      return `${e.revision}  ${e.type.padEnd(8)}  ${e.name}${e.token ? `  token ${e.token}` : ''}  session ${shortSession(e.sessionId)}\n`;
  }
}

/** A plain object for --json output. */
export function lockJson(lock: LockInfo, revision?: number): Record<string, unknown> {
  return { ...(revision === undefined ? {} : { revision }), ...lock };
}
