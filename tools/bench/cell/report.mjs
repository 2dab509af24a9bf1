// Terminal table and the markdown section of docs/benchmarks.md, from one run's results.
import { SCENARIOS } from './scenarios.mjs';

const int = (n) => (n === undefined || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en-US'));
const ms = (n) =>
  n === undefined || !Number.isFinite(n) ? '—' : n >= 100 ? `${Math.round(n)} ms` : n >= 10 ? `${n.toFixed(1)} ms` : `${n.toFixed(2)} ms`;
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
const BASELINE_ROW = { 'keepalive-batched-10000': 'keepalive-10000' };

function headline(r) {
  if (!r) return '—';
  if (r.skipped) return `— (${r.skipped})`;
  if (r.error) return 'error';
  if (r.unavailableMs !== undefined) return `${int(r.unavailableMs)} ms`;
  return `${int(r.rate)}/s (p50 ${ms(r.p50)})`;
}

/** Fencer against the baseline build, when the run has one (higher is better; failover: lower). */
function baselineRatio(key, results) {
  const f = find(results, key, 'fencer');
  const b = find(results, key, 'fencer-baseline');
  if (!f || !b || f.error || b.error || f.skipped || b.skipped) return '—';
  if (f.unavailableMs !== undefined) return `${(f.unavailableMs / b.unavailableMs).toFixed(2)}× the time`;
  const thr = `${(f.rate / b.rate).toFixed(2)}×`;
  return key === 'uncontended-1' ? `${thr}; p50 ${(f.p50 / b.p50).toFixed(2)}×` : thr;
}

function ratio(key, f, e) {
  if (!f || !e || f.error || e.error || f.skipped || e.skipped) return '—';
  if (f.unavailableMs !== undefined) return `${(f.unavailableMs / e.unavailableMs).toFixed(2)}× the time`;
  const thr = `${(f.rate / e.rate).toFixed(2)}×`;
  if (key === 'uncontended-1') return `${thr}; p50 ${(f.p50 / e.p50).toFixed(2)}×`;
  return thr;
}

function baselineKey(systems) {
  return systems.find((s) => s.key === 'etcd5')?.key ?? systems.find((s) => s.key.startsWith('etcd'))?.key;
}

/** A system's result in a scenario: with several rounds (`--rounds`), its median round, every round in the note. */
function find(results, scenario, system) {
  const all = results.filter((r) => r.scenario === scenario && r.system === system);
  const measured = all.filter((r) => !r.error && !r.skipped);
  if (all.length <= 1 || measured.length === 0) return all[0];
  // The 1-client row is judged on its p50, every other row on its rate; of two middle rounds, the worse.
  const byP50 = scenario === 'uncontended-1';
  const badness = (r) => (byP50 ? r.p50 : -r.rate);
  const sorted = [...measured].sort((a, b) => badness(a) - badness(b));
  const median = sorted[sorted.length >> 1];
  const failedRounds = all.length - measured.length;
  const each = measured.map((r) => `${int(r.rate)}/s p50 ${ms(r.p50)}`).join('; ');
  const note = `median of ${measured.length} rounds by ${byP50 ? 'p50' : 'rate'} (${each})${failedRounds ? `; ${failedRounds} round${failedRounds > 1 ? 's' : ''} failed` : ''}`;
  return { ...median, note: median.note ? `${median.note}; ${note}` : note };
}

function targetCell(key, f, e) {
  const t = TARGETS[key];
  if (!t) return '';
  if (!f || f.error || (key !== 'failover-16' && (!e || e.error))) return `${t.text}: not measured`;
  return `${t.text}: **${t.ok(f, e) ? 'met' : 'missed'}**`;
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
    const base = baselineKey(systems);
    const hasBaseline = systems.some((s) => s.key === 'fencer-baseline');
    const cols = [
      'scenario',
      ...systems.map((s) => s.label),
      ...(hasBaseline ? ['Fencer / baseline'] : []),
      ...(base ? [`Fencer / ${base}`, 'target'] : []),
    ];
    const rows = meta.scenarioKeys.map((key) => {
      const f = find(results, key, 'fencer');
      const e = base ? find(results, BASELINE_ROW[key] ?? key, base) : undefined;
      return [
        key,
        ...systems.map((s) => headline(find(results, key, s.key))),
        ...(hasBaseline ? [baselineRatio(key, results)] : []),
        ...(base ? [ratio(key, f, e), targetCell(key, f, e).replace(/\*/g, '')] : []),
      ];
    });
    const widths = cols.map((c, i) => Math.max(c.length, ...rows.map((r) => String(r[i]).length)));
    const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join(' | ');
    return [line(cols), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map(line)].join('\n');
  },
};

export function renderMarkdown(meta, systems, results) {
  const base = baselineKey(systems);
  const out = [];
  out.push('## Cell: Fencer against etcd and ZooKeeper');
  out.push('');
  out.push(
    `Measured by \`npm run bench\` (\`tools/bench/run.mjs\`) on ${meta.date.slice(0, 16).replace('T', ' ')} UTC, one run of ${Math.round(meta.totalS)} s: ${meta.cpu}, ${meta.memGiB} GiB, ${meta.kernel}, Node ${meta.node}. ` +
      `Every system ran on 127.0.0.1 with fsync on, on the same ${meta.cpu.split(' ×')[0]} cores as the load generator and as other engineers' work on this shared machine ` +
      `(load average ${meta.loadStart} at the start, ${meta.loadEnd} at the end; the "others" CPU column below is what the rest of the machine used during each row).`,
  );
  out.push('');
  out.push(
    `Method: one Node process drives every system with the same closed-loop clients (each client waits for its answer before its next call) over grpc-js (ZooKeeper: node-zookeeper-client). ` +
      `${meta.opts.systemWarmupS ? `Every system first gets ${meta.opts.systemWarmupS} s of unmeasured load (uncontended with 16 clients and with 1, then contended), so that Node's JIT has compiled the hot paths as in a server that has been up for a while. ` : ''}Each scenario runs on every system back to back (${meta.opts.warmupS} s warm-up, then ${meta.opts.seconds} s measured), so each ratio compares measurements taken a few seconds apart${meta.opts.rounds > 1 ? `; every scenario but failover ran ${meta.opts.rounds} such rounds, the systems' order alternating, and each row shows that system's median round (by p50 for 1 client, by rate elsewhere; every round is in the notes)` : ''}. ` +
      'Latencies are HDR histograms (hdr-histogram-js) of the acquire call (contended: the wait for the grant). CPU is utime+stime from /proc/PID/stat of all server processes, ' +
      'and process.cpuUsage() of the load generator, over the measured window, in cores (CPU seconds per second). ' +
      '"Failed calls" counts attempts that ended in an error and were retried: the Fencer client follows leader hints and retries every 10–100 ms with the same request, the etcd client moves to the next endpoint, the ZooKeeper client retries after a lost connection. ' +
      "Failover: two kill -9 of the current leader under 16 clients' uncontended load, the killed member restarted and caught up between them; unavailability is the time from the kill to the first acquire sent after the kill that succeeds.",
  );
  out.push('');
  for (const s of meta.systems) out.push(`- **${s.label}** (${s.version}): ${s.settings}.`);
  out.push(
    '- Sessions: a Fencer session (OpenSession), an etcd lease (LeaseGrant), a ZooKeeper session (one connection). A lock: Fencer Acquire (wait) and Release; etcd v3lock `Lock(name, lease)` and `Unlock(key)`; ' +
      'ZooKeeper the ephemeral-sequential recipe (create, getChildren, watch the predecessor; release = delete). Try-lock: Fencer Acquire with wait 0; etcd clientv3 `Mutex.TryLock` (a Txn, and a delete when not the owner); ZooKeeper create + getChildren + delete.',
  );
  out.push('');
  out.push(`### Side by side${base ? ` (ratio against ${systems.find((s) => s.key === base).label})` : ''}`);
  out.push('');
  const hasBaseline = systems.some((s) => s.key === 'fencer-baseline');
  const head = [
    'scenario',
    ...systems.map((s) => s.label),
    ...(hasBaseline ? ['Fencer / baseline'] : []),
    ...(base ? ['Fencer / etcd', 'target'] : []),
  ];
  out.push(`| ${head.join(' | ')} |`);
  out.push(`| ${head.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`);
  for (const key of meta.scenarioKeys) {
    const f = find(results, key, 'fencer');
    const e = base ? find(results, BASELINE_ROW[key] ?? key, base) : undefined;
    const cells = [
      SCENARIOS[key].title,
      ...systems.map((s) => headline(find(results, key, s.key))),
      ...(hasBaseline ? [baselineRatio(key, results)] : []),
      ...(base ? [ratio(key, f, e), targetCell(key, f, e)] : []),
    ];
    out.push(`| ${cells.join(' | ')} |`);
  }
  out.push('');
  out.push('### Raw figures');
  out.push('');
  out.push(
    '| scenario | system | ops in window | rate | p50 | p99 | failed calls | CPU servers | CPU load generator | CPU others | notes |',
  );
  out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const key of meta.scenarioKeys) {
    for (const s of systems) {
      const r = find(results, key, s.key);
      if (!r) continue;
      if (r.skipped || r.error) {
        out.push(`| ${key} | ${s.label} | | | | | | | | | ${r.skipped ?? `error: ${r.error.split('\n')[0]}`} |`);
        continue;
      }
      const c = r.cpu;
      const rate = r.unavailableMs !== undefined ? `${int(r.unavailableMs)} ms unavailable` : `${int(r.rate)} ${SCENARIOS[key].unit}`;
      out.push(
        `| ${key} | ${s.label} | ${int(r.ops)} | ${rate} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.failed} | ${cores(c.serverS, c.wallS)} | ${cores(c.loadgenS, c.wallS)} | ${cores(c.otherS, c.wallS)} | ${r.note ?? ''} |`,
      );
    }
  }
  out.push('');
  return out.join('\n');
}
