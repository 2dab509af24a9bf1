/**
 * Goal: the alert rules in infra/prometheus pass `promtool check rules` and
 * `promtool test rules` (each alert fires on the series that should raise
 * it and stays quiet on healthy ones), the example configuration passes
 * `promtool check config`; every metric a rule names is registered by the
 * code (the cell node's, the routers' and proxies', the control plane's
 * registries, built as the processes build them); and every alert has a
 * runbook in docs/operations.md at the anchor its runbook_url names.
 * Method: promtool (Debian prometheus; skipped with a reason where missing,
 * failed under CI=true) on the files; the rules' expressions scanned for
 * fencer_ names, histogram suffixes removed, compared with the names in the
 * registries' output; the runbook's headings turned into anchors.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { NodeMetrics } from '@fencer/cell-node';
import { ControlPlaneMetrics } from '@fencer/control-plane';
import { RouterMetrics, routingSourceFor } from '@fencer/routing';
import { needTool, root } from './support.js';

const dir = path.join(root, 'infra/prometheus');
interface Rule {
  alert: string;
  expr: string;
  annotations: { runbook_url: string };
}
const rules = (parse(readFileSync(path.join(dir, 'fencer-alerts.yml'), 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
  (g) => g.rules,
);

/** Every metric name the processes register, as their registries expose them. */
async function registeredNames(): Promise<Set<string>> {
  const node = new NodeMetrics();
  const router = new RouterMetrics(new Registry(), true);
  // The control-plane routing source registers its own series (switches, the instance followed) in the registry given.
  routingSourceFor({ controlPlane: 'http://127.0.0.1:1' }, pino({ level: 'silent' }), router.registry).close();
  const cp = new ControlPlaneMetrics();
  cp.watchCells(() => []);
  cp.watchTerm(() => 0);
  const names = new Set<string>();
  for (const r of [node.registry, router.registry, cp.registry]) for (const m of await r.getMetricsAsJSON()) names.add(m.name);
  return names;
}

/** The fencer_ metric names an expression uses (histogram series reduced to the histogram's name). */
function namesIn(expr: string): string[] {
  return [...expr.matchAll(/\bfencer_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''));
}

const promtool = needTool('promtool', 'prometheus', 'prometheus.spec');
const run = (args: string[]) => execFileSync(promtool!, args, { cwd: dir, encoding: 'utf8', timeout: 120_000 });

describe('infra/prometheus', () => {
  it.skipIf(promtool === undefined)('the rules pass promtool check rules, and the example config promtool check config', () => {
    expect(run(['check', 'rules', 'fencer-alerts.yml'])).toMatch(/SUCCESS: \d+ rules found/);
    expect(run(['check', 'config', 'prometheus.yml'])).toMatch(/SUCCESS/);
  });

  it.skipIf(promtool === undefined)('the rules pass promtool test rules', () => {
    expect(run(['test', 'rules', 'fencer-alerts.test.yml'])).toMatch(/SUCCESS/);
  });

  it('every metric a rule names is registered by the code', async () => {
    const registered = await registeredNames();
    const named = new Set(rules.flatMap((r) => namesIn(r.expr)));
    expect(named.size).toBeGreaterThan(10);
    expect([...named].filter((n) => !registered.has(n))).toEqual([]);
    // The list of metrics that exist, each alerted on.
    for (const n of [
      'fencer_leader_changes_total',
      'fencer_raft_commit_index',
      'fencer_raft_applied_index',
      'fencer_wal_fsync_seconds',
      'fencer_proposal_commit_seconds',
      'fencer_session_expiries_total',
      'fencer_routing_control_plane_switches_total',
      'fencer_cp_is_leader',
      'fencer_cp_cell_replicas_unreachable',
      'fencer_cp_snapshot_last_success_timestamp_seconds',
      'fencer_cp_move_oldest_state_seconds',
    ])
      expect(named.has(n), n).toBe(true);
  });

  it('a name the code does not register would be caught', async () => {
    const registered = await registeredNames();
    expect(namesIn('rate(fencer_no_such_metric_bucket[5m])').filter((n) => !registered.has(n))).toEqual(['fencer_no_such_metric']);
  });

  it('every alert has a runbook in docs/operations.md at the anchor it names', () => {
    const doc = readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
    const anchors = new Set(
      [...doc.matchAll(/^#{2,4} (.+)$/gm)].map((m) =>
        m[1]!
          .trim()
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    for (const r of rules) {
      expect(r.annotations.runbook_url, r.alert).toBe(`docs/operations.md#${r.alert.toLowerCase()}`);
      expect(anchors.has(r.alert.toLowerCase()), `a "### ${r.alert}" section`).toBe(true);
    }
  });
});
