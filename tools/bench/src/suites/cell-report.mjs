// The cell suite's report: its rows in the terminal, the side-by-side
// table, the cell section of docs/benchmarks.md and its summary rows.
// The first system of a run is "Fencer" in every ratio; its baseline twin
// (key `<its key>-baseline`) and the first etcd are what it is compared to.
import { SCENARIOS } from './cell-scenarios.mjs';
import { fmt, markdownTable, textTable } from '../report.mjs';

const { int, ms } = fmt;
const cores = (s, wall) => (wall ? (s / wall).toFixed(2) : '—');

/** The issue's targets: Fencer (five replicas) against etcd (five members), same run. */
export const TARGETS = {
  'uncontended-64': { text: '≥ 3× etcd', ok: (f, e) => e && f.rate / e.rate >= 3 },
  'contended-16': { text: '≥ 5× etcd', ok: (f, e) => e && f.rate / e.rate >= 5 },
  'uncontended-1': { text: 'p50 ≤ etcd', ok: (f, e) => e && f.p50 <= e.p50 },
  'keepalive-10000': { text: '≥ 3× etcd', ok: (f, e) => e && f.rate / e.rate >= 3 },
  'keepalive-batched-10000': { text: '≥ 3× etcd lease keepalives', ok: (f, e) => e && f.rate / e.rate >= 3 },
  'failover-16': { text: '< 2.5 s', ok: (f) => f.unavailableMs < 2500 },
};

/** Rows whose etcd counterpart is another row (etcd has no batched keepalive: compare with its lease keepalives). */
const ETCD_ROW = { 'keepalive-batched-10000': 'keepalive-10000' };

const measured = (r) => r && !r.error && !r.skipped;

function headline(r) {
  if (!r) return '—';
  if (r.skipped) return `— (${r.skipped})`;
  if (r.error) return 'error';
  if (r.unavailableMs !== undefined) return `${int(r.unavailableMs)} ms`;
  return `${int(r.rate)}/s (p50 ${ms(r.p50)})`;
}

/** a against b: time for failover, rate elsewhere, and p50 too at 1 client. */
function ratio(key, a, b) {
  if (!measured(a) || !measured(b)) return '—';
  if (a.unavailableMs !== undefined) return `${(a.unavailableMs / b.unavailableMs).toFixed(2)}× the time`;
  const thr = `${(a.rate / b.rate).toFixed(2)}×`;
  return key === 'uncontended-1' ? `${thr}; p50 ${(a.p50 / b.p50).toFixed(2)}×` : thr;
}

/** A system's result in a scenario: with several rounds, its median round (every round in the note). */
export function find(results, scenario, system) {
  const all = results.filter((r) => r.scenario === scenario && r.system === system);
  const ok = all.filter(measured);
  if (all.length <= 1 || ok.length === 0) return all[0];
  // The 1-client row is judged on its p50, every other row on its rate; of two middle rounds, the worse.
  const byP50 = scenario === 'uncontended-1';
  const badness = (r) => (byP50 ? r.p50 : -r.rate);
  const median = [...ok].sort((a, b) => badness(a) - badness(b))[ok.length >> 1];
  const failedRounds = all.length - ok.length;
  const each = ok.map((r) => `${int(r.rate)}/s p50 ${ms(r.p50)}`).join('; ');
  const note = `median of ${ok.length} rounds by ${byP50 ? 'p50' : 'rate'} (${each})${failedRounds ? `; ${failedRounds} round${failedRounds > 1 ? 's' : ''} failed` : ''}`;
  return { ...median, note: median.note ? `${median.note}; ${note}` : note };
}

function targetCell(key, f, e) {
  const t = TARGETS[key];
  if (!t) return '';
  if (!measured(f) || (key !== 'failover-16' && !measured(e))) return `${t.text}: not measured`;
  return `${t.text}: **${t.ok(f, e) ? 'met' : 'missed'}**`;
}

/** Who is compared with whom in this run. */
function roles(systems) {
  const fencer = systems[0];
  const baseline = systems.find((s) => s.key === `${fencer.key}-baseline`);
  const etcd = systems.find((s) => s.key === 'etcd5') ?? systems.find((s) => s.key.startsWith('etcd'));
  return { fencer, baseline, etcd };
}

/** The side-by-side table: head and rows (markdown emphasis in the target column). */
function sideBySide(meta, systems, results, titleOf) {
  const { fencer, baseline, etcd } = roles(systems);
  const head = [
    'scenario',
    ...systems.map((s) => s.label),
    ...(baseline ? [`${fencer.label} / ${baseline.label}`] : []),
    ...(etcd ? [`Fencer / ${etcd.key}`, 'target'] : []),
  ];
  const rows = meta.scenarioKeys.map((key) => {
    const f = find(results, key, fencer.key);
    const e = etcd ? find(results, ETCD_ROW[key] ?? key, etcd.key) : undefined;
    return [
      titleOf(key),
      ...systems.map((s) => headline(find(results, key, s.key))),
      ...(baseline ? [ratio(key, f, find(results, key, baseline.key))] : []),
      ...(etcd ? [ratio(key, f, e), targetCell(key, f, e)] : []),
    ];
  });
  return { head, rows };
}

export const renderTerminal = {
  row(system, sc, r) {
    if (r.error) return `${system.label.padEnd(22)} ERROR ${r.error.split('\n')[0]}`;
    const c = r.cpu;
    const main =
      r.unavailableMs !== undefined
        ? `${int(r.unavailableMs)} ms unavailable (worst)`
        : `${int(r.rate)} ${sc.unit}  p50 ${ms(r.p50)}  p99 ${ms(r.p99)}`;
    return `${system.label.padEnd(22)} ${main}  failed ${r.failed}  cpu: servers ${cores(c.serverS, c.wallS)}, loadgen ${cores(c.loadgenS, c.wallS)}, others ${cores(c.otherS, c.wallS)} cores${r.note ? `  [${r.note}]` : ''}`;
  },
  table(meta, systems, results) {
    const { head, rows } = sideBySide(meta, systems, results, (key) => key);
    return textTable(
      head,
      rows.map((r) => r.map((c) => String(c).replace(/\*/g, ''))),
    );
  },
};

function rawRow(key, s, r) {
  if (r.skipped || r.error) return [key, s.label, '', '', '', '', '', '', '', '', r.skipped ?? `error: ${r.error.split('\n')[0]}`];
  const c = r.cpu;
  const rate = r.unavailableMs !== undefined ? `${int(r.unavailableMs)} ms unavailable` : `${int(r.rate)} ${SCENARIOS[key].unit}`;
  const cpu = [c.serverS, c.loadgenS, c.otherS].map((x) => cores(x, c.wallS));
  return [key, s.label, int(r.ops), rate, ms(r.p50), ms(r.p99), r.failed, ...cpu, r.note ?? ''];
}

function methodText(meta) {
  const o = meta.opts;
  return (
    `Method: one Node process drives every system with the same closed-loop clients (each client waits for its answer before its next call) over grpc-js (ZooKeeper: node-zookeeper-client); KeepAlive messages are raw gRPC frames over node:http2, ${o.keepaliveTo === 'spread' ? 'streams spread over every member' : 'every stream to the leader'}. ` +
    `${o.systemWarmupS ? `Every system first gets ${o.systemWarmupS} s of unmeasured load (uncontended with 16 clients and with 1, then contended), so that Node's JIT has compiled the hot paths as in a server that has been up for a while. ` : ''}Each scenario runs on every system back to back (${o.warmupS} s warm-up, then ${o.seconds} s measured), so each ratio compares measurements taken a few seconds apart${o.rounds > 1 ? `; every scenario but failover ran ${o.rounds} such rounds, the systems' order alternating, and each row shows that system's median round (by p50 for 1 client, by rate elsewhere; every round is in the notes)` : ''}. ` +
    'Latencies are HDR histograms (hdr-histogram-js) of the acquire call (contended: the wait for the grant). CPU is utime+stime from /proc/PID/stat of all server processes, and process.cpuUsage() of the load generator, over the measured window, in cores (CPU seconds per second). ' +
    '"Failed calls" counts attempts that ended in an error and were retried: the Fencer client follows leader hints and retries every 10–100 ms with the same request, the etcd client moves to the next endpoint, the ZooKeeper client retries after a lost connection. ' +
    `Failover: ${o.failoverTrials} kill -9 of the current leader under 16 clients' uncontended load, the killed member restarted and caught up between them; unavailability is the time from the kill to the first acquire sent after the kill that succeeds.`
  );
}

const LOCK_MODELS =
  '- Sessions: a Fencer session (OpenSession), an etcd lease (LeaseGrant), a ZooKeeper session (one connection). A lock: Fencer Acquire (wait) and Release; etcd v3lock `Lock(name, lease)` and `Unlock(key)`; ' +
  'ZooKeeper the ephemeral-sequential recipe (create, getChildren, watch the predecessor; release = delete). Try-lock: Fencer Acquire with wait 0; etcd clientv3 `Mutex.TryLock` (a Txn, and a delete when not the owner); ZooKeeper create + getChildren + delete.';

export function renderMarkdown(meta, systems, results) {
  const { etcd } = roles(systems);
  const { head, rows } = sideBySide(meta, systems, results, (key) => SCENARIOS[key].title);
  const raw = meta.scenarioKeys.flatMap((key) =>
    systems.map((s) => [s, find(results, key, s.key)]).flatMap(([s, r]) => (r ? [rawRow(key, s, r)] : [])),
  );
  return [
    '## Cell: Fencer against etcd and ZooKeeper',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 16).replace('T', ' ')} UTC, one run of ${Math.round(meta.totalS)} s: ${meta.cpu}, ${meta.memGiB} GiB, ${meta.kernel}, Node ${meta.node}. ` +
      `Every system ran on 127.0.0.1 with fsync on, on the same ${meta.cpu.split(' ×')[0]} cores as the load generator and as other work on this shared machine ` +
      `(load average ${meta.loadStart} at the start, ${meta.loadEnd} at the end; the "others" CPU column below is what the rest of the machine used during each row).`,
    '',
    methodText(meta),
    '',
    ...meta.systems.map((s) => `- **${s.label}** (${s.version}): ${s.settings}.`),
    LOCK_MODELS,
    '',
    `### Side by side${etcd ? ` (ratio against ${etcd.label})` : ''}`,
    '',
    markdownTable(head, rows),
    '',
    '### Raw figures',
    '',
    markdownTable(
      [
        'scenario',
        'system',
        'ops in window',
        'rate',
        'p50',
        'p99',
        'failed calls',
        'CPU servers',
        'CPU load generator',
        'CPU others',
        'notes',
      ],
      raw,
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
    ),
    '',
  ].join('\n');
}

/** The summary's rows for what this run measured, Fencer against etcd. */
export function summaryRows(meta, systems, results) {
  const { fencer, etcd } = roles(systems);
  // The summary's cell rows are a five-replica cell, clients straight to it, against five-member etcd.
  if (fencer.key !== 'fencer' || etcd?.key !== 'etcd5') return [];
  const pair = (key, text) => {
    const f = find(results, key, fencer.key);
    const e = find(results, ETCD_ROW[key] ?? key, etcd.key);
    return measured(f) && measured(e) ? text(f, e) : undefined;
  };
  const rowsByKey = {
    'uncontended-1': ['1-client acquire+release, p50, Fencer / etcd', (f, e) => `${ms(f.p50)} / ${ms(e.p50)} (${fmt.ratio(f.p50, e.p50)})`],
    'uncontended-64': [
      '64 clients, acquire+release cycles/s, Fencer / etcd',
      (f, e) => `${int(f.rate)} / ${int(e.rate)} (${fmt.ratio(f.rate, e.rate)})`,
    ],
    'contended-16': [
      'contended handoffs/s (16 clients, one name), Fencer / etcd',
      (f, e) => `${int(f.rate)} / ${int(e.rate)} (${fmt.ratio(f.rate, e.rate)})`,
    ],
    'keepalive-10000': [
      'KeepAlive messages/s (10,000 sessions), Fencer / etcd leases',
      (f, e) => `${int(f.rate)} / ${int(e.rate)} (${fmt.ratio(f.rate, e.rate)})`,
    ],
    'keepalive-batched-10000': [
      'heartbeats/s in session-proxy batches, against etcd lease keepalives',
      (f, e) => `${int(f.rate)} (${fmt.ratio(f.rate, e.rate)})`,
    ],
    'failover-16': [
      'unavailable after kill -9 of the leader, worst trial, Fencer / etcd',
      (f, e) => `${int(f.unavailableMs)} / ${int(e.unavailableMs)} ms`,
    ],
  };
  return Object.entries(rowsByKey).flatMap(([key, [figure, text]]) => {
    const value = meta.scenarioKeys.includes(key) ? pair(key, text) : undefined;
    return value ? [{ id: `cell-${key}`, figure: `Cell (5 replicas, 5-member etcd): ${figure}`, value, command: meta.command }] : [];
  });
}
