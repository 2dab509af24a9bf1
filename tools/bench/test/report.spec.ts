// Goal: a suite rewrites only its own section of docs/benchmarks.md (its
// hand-written notes kept) and only its own summary rows, and the cell
// report compares the right rounds and systems.
// Method: the pure text functions on small documents, and the cell
// section rendered from a fixture of results with three rounds.
import { describe, expect, it } from 'vitest';
import { commandLine, replaceSection, replaceSummaryRows, SUMMARY_ORDER } from '../src/report.mjs';
import { find, renderMarkdown, summaryRows, type CellMeta, type CellResult } from '../src/suites/cell-report.mjs';

const DOC = [
  '# Benchmarks',
  '',
  '<!-- summary:start -->',
  '| figure | today | measured | reproduce |',
  '| --- | --- | --- | --- |',
  '| <a id="wal-64"></a>WAL | 1 | 2026-01-01 | `x` |',
  '| <a id="fleet-heartbeats"></a>Fleet | 2 | 2026-01-01 | `y` |',
  '<!-- summary:end -->',
  '',
  '<!-- wal:start -->',
  '## WAL',
  'old figures',
  '<!-- wal-notes:start -->',
  'what the WAL finding says',
  '<!-- wal-notes:end -->',
  '<!-- wal:end -->',
  '',
  'text after',
  '',
].join('\n');

describe('the docs writer', () => {
  it('replaces its section and keeps the notes inside it when asked', () => {
    const next = replaceSection(DOC, 'wal', '## WAL\nnew figures', { keepNotes: true });
    expect(next).toContain('new figures');
    expect(next).not.toContain('old figures');
    expect(next).toContain('what the WAL finding says');
    expect(next).toContain('text after');
    expect(replaceSection(DOC, 'wal', '## WAL\nnew')).not.toContain('what the WAL finding says');
  });

  it('quotes the command that reproduces a run, without the --json file it wrote', () => {
    expect(commandLine(['efficiency', '--json', '/tmp/x.json', '--seconds', '4'])).toBe('node tools/bench/run.mjs efficiency --seconds 4');
    expect(commandLine(['moves', '--sizes', ''])).toBe("node tools/bench/run.mjs moves --sizes ''");
  });

  it('appends a section the document does not have yet', () => {
    const next = replaceSection(DOC, 'duties', '## Duties');
    expect(next.trimEnd().endsWith('<!-- duties:start -->\n## Duties\n<!-- duties:end -->')).toBe(true);
    expect(next).toContain('old figures');
  });

  it('replaces its summary rows by id, keeps the others, and orders them', () => {
    const next = replaceSummaryRows(DOC, [
      { id: 'cell-uncontended-1', figure: 'Cell 1 client', value: '1.8 ms', command: 'node tools/bench/run.mjs' },
      { id: 'wal-64', figure: 'WAL', value: '70,000', command: 'node tools/bench/run.mjs wal' },
    ]);
    const ids = [...next.matchAll(/<a id="([\w-]+)">/g)].map((m) => m[1]);
    expect(ids).toEqual(['wal-64', 'cell-uncontended-1', 'fleet-heartbeats']);
    expect(ids).toEqual([...ids].sort((a, b) => SUMMARY_ORDER.indexOf(a) - SUMMARY_ORDER.indexOf(b)));
    expect(next).toContain('| <a id="wal-64"></a>WAL | 70,000 |');
    expect(next).not.toContain('| 1 | 2026-01-01 |');
    expect(next).toContain('| <a id="fleet-heartbeats"></a>Fleet | 2 | 2026-01-01 | `y` |');
  });
});

const cpu = { wallS: 8, serverS: 8, loadgenS: 4, otherS: 0 };
const round = (system: string, r: number, p50: number, rate: number): CellResult => ({
  scenario: 'uncontended-1',
  system,
  round: r,
  ops: rate * 8,
  rate,
  p50,
  p99: p50 * 2,
  failed: 0,
  cpu,
});
const RESULTS: CellResult[] = [
  round('fencer', 0, 2.0, 250),
  round('fencer', 1, 1.5, 300),
  round('fencer', 2, 1.8, 280),
  round('etcd5', 0, 1.6, 310),
  round('etcd5', 1, 1.7, 300),
  round('etcd5', 2, 1.5, 320),
  { scenario: 'failover-16', system: 'fencer', round: 0, ops: 2, unavailableMs: 1500, failed: 3, cpu },
  { scenario: 'failover-16', system: 'etcd5', round: 0, ops: 2, unavailableMs: 7000, failed: 1, cpu },
];
const SYSTEMS = [
  { key: 'fencer', label: 'Fencer, 5 replicas' },
  { key: 'etcd5', label: 'etcd, 5 members' },
];
const META: CellMeta = {
  date: '2026-12-02T10:00:00.000Z',
  command: 'node tools/bench/run.mjs --rounds 3',
  cpu: '2 × CPU',
  memGiB: '24.0',
  kernel: 'Linux',
  node: 'v20',
  loadStart: '1',
  loadEnd: '1',
  totalS: 100,
  opts: { seconds: 8, warmupS: 1, rounds: 3, systemWarmup: 15, failoverTrials: 2, keepaliveTo: 'leader' },
  scenarioKeys: ['uncontended-1', 'failover-16'],
  systems: SYSTEMS.map((s) => ({
    ...s,
    version: s.key === 'etcd5' ? 'etcd 3.4.23' : 'cell-node 0.1.0',
    settings: s.key === 'etcd5' ? '5 members' : '5 replicas',
  })),
};

describe('the cell report', () => {
  it('shows the median round, by p50 at one client', () => {
    expect(find(RESULTS, 'uncontended-1', 'fencer')?.p50).toBe(1.8);
    expect(find(RESULTS, 'uncontended-1', 'etcd5')?.p50).toBe(1.6);
    expect(find(RESULTS, 'uncontended-1', 'fencer')?.note).toMatch(/median of 3 rounds by p50/);
  });

  it('compares the first system with etcd and judges the targets', () => {
    const md = renderMarkdown(META, SYSTEMS, RESULTS);
    expect(md).toContain('Measured by `node tools/bench/run.mjs --rounds 3`');
    expect(md).toMatch(
      /1 client \| 280\/s \(p50 1\.80 ms\) \| 310\/s \(p50 1\.60 ms\) \| 0\.90×; p50 1\.13× \| p50 ≤ etcd: \*\*missed\*\*/,
    );
    expect(md).toContain('- **etcd, 5 members** (etcd 3.4.23): 5 members.');
    expect(md).toMatch(/1,500 ms \| 7,000 ms \| 0\.21× the time \| < 2\.5 s: \*\*met\*\*/);
  });

  it('gives the summary rows of what the run measured', () => {
    const rows = summaryRows(META, SYSTEMS, RESULTS);
    expect(rows.map((r) => r.id)).toEqual(['cell-uncontended-1', 'cell-failover-16']);
    expect(rows[0].value).toBe('1.80 ms / 1.60 ms (1.13×)');
    expect(rows[1].value).toBe('1,500 / 7,000 ms');
  });
});
