/**
 * The grant promise (docs/architecture.md, "Promises"): GRANTED with token t
 * means the grant is committed at revision t. Every grant acknowledged to a client must be in the final
 * committed log: the entry at revision t grants that name to that session.
 * Grants below the log's floor (compacted into a snapshot on every replica)
 * cannot be looked up; they are counted, not checked.
 */
import type { History } from '../history.js';
import { VIOLATIONS_KEPT_MAX } from '../limits.js';
import type { CanonicalLog } from './watch-check.js';

export interface LogGrantReport {
  readonly grants: number;
  readonly checked: number;
  readonly compacted: number;
  readonly violations: string[];
  readonly violationCount: number;
}

export function checkGrantsInLog(history: History, log: CanonicalLog): LogGrantReport {
  const violations: string[] = [];
  let count = 0;
  let grants = 0;
  let checked = 0;
  let compacted = 0;
  for (const o of history.ops) {
    if (o.op.f !== 'acquire' || o.outcome !== 'ok' || o.r?.f !== 'acquire' || o.r.status !== 'GRANTED') continue;
    grants++;
    const t = o.r.token;
    const where = `${o.p}#${o.id} ${o.op.name} granted to ${o.op.s} with token ${t}`;
    if (t > log.last) {
      if (count++ < VIOLATIONS_KEPT_MAX) violations.push(`${where}: past the final commit index ${log.last}`);
      continue;
    }
    if (t < log.floor) {
      compacted++;
      continue;
    }
    checked++;
    const events = log.events.get(t) ?? [];
    const a = o.op;
    if (!events.some(([type, name, session, token]) => type === 'ACQUIRED' && name === a.name && session === a.s && token === t)) {
      if (count++ < VIOLATIONS_KEPT_MAX) violations.push(`${where}: the entry at ${t} has [${events.map((e) => e.join(' ')).join('; ')}]`);
    }
  }
  return { grants, checked, compacted, violations, violationCount: count };
}
