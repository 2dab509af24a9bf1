/**
 * The promise at the resource, where fencing is meant to hold it:
 * - per name, the tokens the resource accepted never decrease (in the order
 *   it decided them);
 * - no lost update: the final counter equals the increments acknowledged to
 *   clients (plus at most the writes whose answer was lost).
 */
import type { History } from '../history.js';
import { VIOLATIONS_KEPT_MAX } from '../limits.js';
import type { ResourceState } from '../resource.js';

export interface ResourceReport {
  readonly fence: boolean;
  readonly acceptedWrites: number;
  readonly rejectedWrites: number;
  readonly rejectedReads: number;
  readonly unknownWrites: number;
  readonly counters: Record<string, { final: number; acked: number; unknown: number }>;
  readonly violations: string[];
  readonly violationCount: number;
}

export function checkResource(history: History, state: ResourceState): ResourceReport {
  const violations: string[] = [];
  let count = 0;
  const report = (v: string): void => {
    if (count++ < VIOLATIONS_KEPT_MAX) violations.push(v);
  };
  const highest = new Map<string, number>();
  let rejectedWrites = 0;
  let rejectedReads = 0;
  for (const d of state.log) {
    if (!d.accepted) {
      if (d.op === 'write') rejectedWrites++;
      else rejectedReads++;
      continue;
    }
    const h = highest.get(d.name) ?? 0;
    if (d.token < h) report(`${d.name}: the resource accepted a ${d.op} with token ${d.token} after token ${h}`);
    highest.set(d.name, Math.max(h, d.token));
  }
  const counters: Record<string, { final: number; acked: number; unknown: number }> = {};
  const entry = (name: string): { final: number; acked: number; unknown: number } =>
    (counters[name] ??= { final: state.counters[name] ?? 0, acked: 0, unknown: 0 });
  let acceptedWrites = 0;
  let unknownWrites = 0;
  for (const o of history.ops) {
    if (o.op.f !== 'ctr-write') continue;
    const c = entry(o.op.name);
    if (o.outcome === 'ok' && o.r?.f === 'ctr-write') {
      if (o.r.accepted) {
        c.acked++;
        acceptedWrites++;
      }
    } else {
      c.unknown++;
      unknownWrites++;
    }
  }
  for (const name of Object.keys(state.counters)) entry(name);
  for (const [name, c] of Object.entries(counters)) {
    if (c.final < c.acked) report(`${name}: lost update: the counter is ${c.final} but ${c.acked} increments were acknowledged`);
    if (c.final > c.acked + c.unknown)
      report(`${name}: the counter is ${c.final}, more than the ${c.acked} acknowledged and ${c.unknown} unknown increments`);
  }
  return { fence: state.fence, acceptedWrites, rejectedWrites, rejectedReads, unknownWrites, counters, violations, violationCount: count };
}
