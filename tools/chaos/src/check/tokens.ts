/**
 * Checks on tokens and revisions that need no model search:
 * - per lock name, tokens strictly increase in real time: a grant answered
 *   before another grant of the same name was asked for has a smaller
 *   token; an exclusive grant's token belongs to no other session's grant;
 * - across all names, revisions respect real time: an operation invoked
 *   after another one completed reports a revision at least as large (a
 *   read), or larger (a write: its entry comes later in the log). With a
 *   `revisionScope`, only within a scope: in the moves mode each namespace
 *   has its own revisions (two cells count apart; a move's import raises
 *   the target's base above the namespace's revisions, so within one
 *   namespace they still only grow).
 */
import type { History, Op } from '../history.js';
import { VIOLATIONS_KEPT_MAX } from '../limits.js';

export interface TokenReport {
  readonly grants: number;
  readonly violations: string[];
  readonly violationCount: number;
}

interface Grant {
  readonly op: Op;
  readonly name: string;
  readonly s: string;
  readonly token: number;
  readonly mode: 'X' | 'S';
}

/**
 * Acknowledged grants, without repeats: re-acquiring a held lock answers the
 * grant the session already has (same token, an old revision), which is not
 * a new grant.
 */
function grantsOf(history: History): { grants: Grant[]; repeats: Set<Op> } {
  const out: Grant[] = [];
  const repeats = new Set<Op>();
  const seen = new Set<string>();
  for (const o of history.ops) {
    if (o.op.f !== 'acquire' || o.outcome !== 'ok' || o.r?.f !== 'acquire' || o.r.status !== 'GRANTED') continue;
    const key = `${o.op.name} ${o.op.s} ${o.r.token}`;
    if (seen.has(key)) {
      repeats.add(o);
      continue;
    }
    seen.add(key);
    out.push({ op: o, name: o.op.name, s: o.op.s, token: o.r.token, mode: o.op.mode });
  }
  return { grants: out, repeats };
}

/** Sweep: for each item in invocation order, the largest value among items completed before it was invoked. */
function sweep<T extends { inv: number; comp: number }>(
  items: readonly T[],
  value: (t: T) => number,
  visit: (t: T, maxBefore: number, by: T | undefined) => void,
): void {
  const byComp = [...items].filter((t) => t.comp < Infinity).sort((a, b) => a.comp - b.comp);
  const byInv = [...items].sort((a, b) => a.inv - b.inv);
  let at = 0;
  let max = -Infinity;
  let by: T | undefined;
  for (const t of byInv) {
    while (at < byComp.length && byComp[at]!.comp < t.inv) {
      const c = byComp[at++]!;
      if (value(c) > max) {
        max = value(c);
        by = c;
      }
    }
    visit(t, max, by);
  }
}

export function checkTokens(history: History, revisionScope: (name: string) => string = () => ''): TokenReport {
  const violations: string[] = [];
  let count = 0;
  const report = (v: string): void => {
    if (count++ < VIOLATIONS_KEPT_MAX) violations.push(v);
  };
  const { grants, repeats } = grantsOf(history);
  const byName = new Map<string, Grant[]>();
  for (const g of grants) {
    const list = byName.get(g.name) ?? [];
    list.push(g);
    byName.set(g.name, list);
  }
  for (const [name, list] of byName) {
    const items = list.map((g) => ({ inv: g.op.inv, comp: g.op.comp, g }));
    sweep(
      items,
      (i) => i.g.token,
      (i, maxBefore, by) => {
        if (i.g.token <= maxBefore)
          report(
            `${name}: grant token ${i.g.token} to ${i.g.s} (asked at ${i.inv.toFixed(1)}) is not above token ${maxBefore} granted to ${by!.g.s} and answered at ${by!.comp.toFixed(1)}`,
          );
      },
    );
    const byToken = new Map<number, Grant[]>();
    for (const g of list) byToken.set(g.token, [...(byToken.get(g.token) ?? []), g]);
    for (const [token, gs] of byToken) {
      const sessions = new Set(gs.map((g) => g.s));
      if (sessions.size > 1 && gs.some((g) => g.mode === 'X'))
        report(`${name}: token ${token} granted to ${[...sessions].join(', ')}, one of them exclusive`);
    }
  }
  // Revisions in real time, across names.
  type Rev = { inv: number; comp: number; rev: number; write: boolean; what: string };
  const scopes = new Map<string, Rev[]>();
  const revsOf = (name: string): Rev[] => {
    const scope = revisionScope(name);
    return scopes.get(scope) ?? scopes.set(scope, []).get(scope)!;
  };
  for (const o of history.ops) {
    if (o.outcome !== 'ok' || !o.r || repeats.has(o)) continue;
    if (o.r.f === 'acquire' && o.op.f === 'acquire' && o.r.status !== 'QUEUED') {
      const rev = o.r.status === 'GRANTED' ? o.r.token : o.r.rev;
      revsOf(o.op.name).push({ inv: o.inv, comp: o.comp, rev, write: true, what: `${o.p}#${o.id} acquire ${o.op.name} ${o.r.status}` });
    } else if (o.r.f === 'get' && o.op.f === 'get') {
      revsOf(o.op.name).push({ inv: o.inv, comp: o.comp, rev: o.r.rev, write: false, what: `${o.p}#${o.id} get ${o.op.name}` });
    }
  }
  for (const revs of scopes.values())
    sweep(
      revs,
      (r) => r.rev,
      (r, maxBefore, by) => {
        if (r.write ? r.rev <= maxBefore : r.rev < maxBefore)
          report(
            `revision ${r.rev} of ${r.what} (invoked at ${r.inv.toFixed(1)}) is below revision ${maxBefore} of ${by!.what}, which completed before`,
          );
      },
    );
  return { grants: grants.length, violations, violationCount: count };
}
