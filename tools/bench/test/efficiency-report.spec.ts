// Goal: the efficiency suite charges every server process of a system to
// its operations (and each component its share), compares Fencer with its
// peers from the same run, judges the targets from those figures,
// and leaves out what was not measured rather than reporting it as zero.
// Method: the pure report functions on a fixture run of three systems,
// and the CPU grouping on a made-up pid table.
import { describe, expect, it } from 'vitest';
import { byComponent } from '../src/measure.mjs';
import {
  charts,
  chartsBlock,
  componentsPerOp,
  cpuMsPerOp,
  pick,
  renderMarkdown,
  summaryRows,
  targets,
  type EfficiencyMeta,
  type EfficiencyResult,
} from '../src/suites/efficiency-report.mjs';

const META: EfficiencyMeta = {
  date: '2026-12-02T13:00:00.000Z',
  cpu: '2 × test CPU',
  node: 'v20',
  loadStart: '1.00 / 1.00 / 1.00',
  loadEnd: '1.00 / 1.00 / 1.00',
  totalS: 100,
  command: 'node tools/bench/run.mjs efficiency',
  clients: [1, 64],
  upkeepIntervalMs: 1333,
  opts: { seconds: 8, warmup: 1, systemWarmup: 15, rounds: 1 },
  systems: [
    { key: 'fencer', label: 'Fencer fleet' },
    { key: 'zk3', label: 'ZooKeeper, 3 servers' },
    { key: 'etcd5', label: 'etcd, 5 members' },
  ],
};

function row(scenario: string, system: string, rate: number, cpuMs: number, p50: number, round = 0): EfficiencyResult {
  const ops = rate * 8;
  const cpu = { wallS: 8, serverS: (cpuMs * ops) / 1000, loadgenS: 1, otherS: 0, perPid: {} };
  return { scenario, system, round, ops, rate, p50, p99: p50 * 3, failed: 0, cpu, cpuMsPerOp: cpuMsPerOp(cpu, ops) };
}

const RESULTS: EfficiencyResult[] = [
  row('cycles-1', 'fencer', 150, 3, 4.0),
  row('cycles-1', 'zk3', 150, 2.5, 5.0),
  row('cycles-1', 'etcd5', 140, 2.8, 4.5),
  row('cycles-64', 'fencer', 900, 1.2, 40),
  row('cycles-64', 'zk3', 1000, 1.4, 35),
  row('cycles-64', 'etcd5', 500, 2.0, 90),
  row('upkeep', 'fencer', 3000, 0.08, 100),
  row('upkeep', 'zk3', 3000, 0.11, 0),
  { scenario: 'upkeep', system: 'etcd5', round: 0, error: 'Error: etcd went away\n  at x' },
];

describe('CPU accounting', () => {
  it('charges the servers CPU over the window to the operations completed in it', () => {
    expect(cpuMsPerOp({ serverS: 2, wallS: 8 }, 1000)).toBeCloseTo(2, 9);
    expect(cpuMsPerOp({ serverS: 2, wallS: 8 }, 0)).toBeUndefined();
  });

  it('groups processes by component, unknown pids apart, and charges each its share per operation', () => {
    const groups = byComponent(
      { 11: 0.5, 12: 0.25, 13: 0.25, 21: 0.2, 31: 0.1, 99: 0.05 },
      new Map([
        [11, 'cell replicas'],
        [12, 'cell replicas'],
        [13, 'cell replicas'],
        [21, 'routers'],
        [31, 'control plane'],
      ]),
    );
    expect(groups).toEqual([
      { component: 'cell replicas', processes: 3, total: 1 },
      { component: 'routers', processes: 1, total: 0.2 },
      { component: 'control plane', processes: 1, total: 0.1 },
      { component: 'other', processes: 1, total: 0.05 },
    ]);
    const per = componentsPerOp(groups, 500);
    expect(per.map((c) => c.cpuMsPerOp)).toEqual([2, 0.4, 0.2, 0.1]);
    expect(componentsPerOp(groups, 0).every((c) => c.cpuMsPerOp === undefined)).toBe(true);
  });
});

describe('the efficiency report', () => {
  it('judges the targets against ZooKeeper-3 and etcd-5 from the same run', () => {
    expect(targets(META, RESULTS)).toEqual([
      ['64 clients: throughput ≥ ZooKeeper-3', '**missed**', '900 / 1,000 cycles/s'],
      ['64 clients: server CPU per cycle ≤ ZooKeeper-3', '**met**', '1.20 ms / 1.40 ms'],
      ['server CPU per KeepAlive ≤ ZooKeeper-3 per session ping', '**met**', '80 µs / 110 µs'],
      ['1 client: p50 ≤ ZooKeeper-3 and etcd-5', '**met**', '4.00 ms / 5.00 ms / 4.50 ms'],
    ]);
  });

  it('says "not measured" for a target whose peer row failed, and shows the error in its table', () => {
    const noZk = RESULTS.filter((r) => !(r.system === 'zk3' && r.scenario === 'cycles-64'));
    expect(targets(META, noZk)[0]).toEqual(['64 clients: throughput ≥ ZooKeeper-3', 'not measured', '900 / — cycles/s']);
    const md = renderMarkdown(META, RESULTS);
    expect(md).toContain('| etcd-5 | LeaseKeepAlive | error: Error: etcd went away |');
    expect(md).toContain(
      '| 64 | 900 | 40.0 ms / 120 ms | 1.20 ms | 1,000 | 35.0 ms / 105 ms | 1.40 ms | 500 | 90.0 ms / 270 ms | 2.00 ms | 0.90×, 0.86× | 1.80×, 0.60× |',
    );
  });

  it('takes the median round by rate', () => {
    const rounds = [
      row('cycles-64', 'fencer', 900, 1, 1, 0),
      row('cycles-64', 'fencer', 700, 1, 1, 1),
      row('cycles-64', 'fencer', 800, 1, 1, 2),
    ];
    expect(pick(rounds, 'cycles-64', 'fencer')?.rate).toBe(800);
  });

  it('writes summary rows only for figures every system measured', () => {
    const rows = summaryRows(META, RESULTS);
    expect(rows.map((r) => r.id)).toEqual(['efficiency-64', 'efficiency-cpu-64', 'efficiency-1']);
    expect(rows[0].value).toBe('900 / 1,000 / 500');
    expect(rows[0].figure).toContain('Fencer / ZooKeeper-3 / etcd-5');
  });

  it('draws throughput, p50, p99 and CPU charts with a line or bar per system, none for a failed row', () => {
    const list = charts(META, RESULTS);
    expect(list.map((c) => c.file)).toEqual([
      'efficiency-throughput.svg',
      'efficiency-p50.svg',
      'efficiency-p99.svg',
      'efficiency-cpu-cycle.svg',
      'efficiency-cpu-upkeep.svg',
    ]);
    expect(list[0].svg).toContain('<title>etcd-5, 64: 500</title>');
    const upkeep = list[4].svg;
    expect(upkeep).toContain('<title>ZooKeeper-3, KeepAlive / ping: 110</title>');
    expect(upkeep).not.toContain('<title>etcd-5,');
  });

  it('opens the page with the targets a line each and every chart from docs/charts', () => {
    const block = chartsBlock(META, RESULTS, charts(META, RESULTS));
    expect(block).toContain('- 64 clients: throughput ≥ ZooKeeper-3: **missed** (900 / 1,000 cycles/s).');
    expect(block.match(/<img src="charts\/efficiency-[a-z0-9-]+\.svg"/g)).toHaveLength(5);
  });
});
