// The one report every suite writes: the machine it ran on, a --json file,
// its section of docs/benchmarks.md (between `<!-- NAME:start -->` and
// `<!-- NAME:end -->`, hand-written notes between `<!-- NAME-notes:start -->`
// and `<!-- NAME-notes:end -->` inside it kept), and its rows of the summary
// table at the top of that file (between `<!-- summary:start -->` and
// `<!-- summary:end -->`). Other sections belong to other suites: the file
// is re-read just before each write.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const DOC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/benchmarks.md');

/** The order of the summary's rows, by id; a row with another id goes last. */
export const SUMMARY_ORDER = [
  'efficiency-64',
  'efficiency-cpu-64',
  'efficiency-1',
  'efficiency-upkeep',
  'fleet-load-steady',
  'fleet-load-storm',
  'scaling-cells',
  'wal-64',
  'lock-fsm-apply',
  'lock-fsm-memory',
  'duties-100000',
  'cell-uncontended-1',
  'cell-uncontended-64',
  'cell-contended-16',
  'cell-keepalive-10000',
  'cell-keepalive-batched-10000',
  'cell-failover-16',
  'fleet-router-1',
  'fleet-router-64',
  'fleet-heartbeats',
  'fleet-heartbeat-cpu',
  'snapshots-size',
  'snapshots-upload',
  'snapshots-restore',
  'moves-unavailable',
];

const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');

/** What a report says about the machine and the moment; `end()` adds the load average at the end. */
export function machineMeta() {
  const meta = {
    date: new Date().toISOString(),
    cpu: `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}`,
    cores: os.cpus().length,
    memGiB: (os.totalmem() / 2 ** 30).toFixed(1),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    loadStart: loadavg(),
  };
  const t0 = Date.now();
  meta.end = () => {
    meta.loadEnd = loadavg();
    meta.totalS = (Date.now() - t0) / 1000;
  };
  return meta;
}

/** The command line that reproduces this run, as docs quote it (without --json FILE, which changes no figure). */
export function commandLine(argv = process.argv.slice(2)) {
  const at = argv.indexOf('--json');
  if (at >= 0) argv = [...argv.slice(0, at), ...argv.slice(at + 2)];
  return ['node tools/bench/run.mjs', ...argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a}'`))].join(' ');
}

export function writeJson(file, data) {
  writeFileSync(file, `${JSON.stringify(data, (k, v) => (typeof v === 'function' ? undefined : v), 2)}\n`);
}

/**
 * `text` with the section `name` replaced by `body` (its notes kept when
 * `keepNotes`), or the section appended when the file has no such markers.
 */
export function replaceSection(text, name, body, { keepNotes = false } = {}) {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const at = text.indexOf(start);
  const to = text.indexOf(end);
  const old = at >= 0 && to > at ? text.slice(at, to + end.length) : '';
  const notesStart = `<!-- ${name}-notes:start -->`;
  const notesEnd = `<!-- ${name}-notes:end -->`;
  const notes = old.includes(notesStart) ? old.slice(old.indexOf(notesStart), old.indexOf(notesEnd) + notesEnd.length) : '';
  const section = [start, body.trimEnd(), ...(keepNotes && notes ? ['', notes] : []), end].join('\n');
  if (!old) return `${text.trimEnd()}\n\n${section}\n`;
  return text.slice(0, at) + section + text.slice(to + end.length);
}

const SUMMARY_HEAD = ['| figure | today | measured | reproduce |', '| --- | --- | --- | --- |'];

/** Parses the summary table's rows: id (from the row's hidden anchor) → row text. */
function summaryRows(text) {
  const start = text.indexOf('<!-- summary:start -->');
  const end = text.indexOf('<!-- summary:end -->');
  const rows = new Map();
  if (start < 0 || end < start) return rows;
  for (const line of text.slice(start, end).split('\n')) {
    const m = /^\| <a id="([\w-]+)"><\/a>/.exec(line);
    if (m) rows.set(m[1], line);
  }
  return rows;
}

/** One summary row: { id, figure, value, command } measured today. */
export function summaryRow({ id, figure, value, command }) {
  return `| <a id="${id}"></a>${figure} | ${value} | ${new Date().toISOString().slice(0, 10)} | \`${command}\` |`;
}

/** `text` with these summary rows replaced or added, in SUMMARY_ORDER. */
export function replaceSummaryRows(text, rows) {
  const all = summaryRows(text);
  for (const r of rows) all.set(r.id, summaryRow(r));
  const rank = (id) => (SUMMARY_ORDER.includes(id) ? SUMMARY_ORDER.indexOf(id) : SUMMARY_ORDER.length);
  const ordered = [...all].sort((a, b) => rank(a[0]) - rank(b[0])).map(([, line]) => line);
  return replaceSection(text, 'summary', [...SUMMARY_HEAD, ...ordered].join('\n'));
}

/**
 * Rewrites section `name` of docs/benchmarks.md with `body` and the
 * summary's `rows` (unless `write` is false); says what it wrote.
 */
export function writeDocs({ name, body, rows = [], keepNotes = false, write = true, doc = DOC }) {
  if (!write) return;
  const text = existsSync(doc) ? readFileSync(doc, 'utf8') : '# Benchmarks\n';
  writeFileSync(doc, replaceSummaryRows(replaceSection(text, name, body, { keepNotes }), rows));
  console.log(`wrote the ${name} section${rows.length ? ' and its summary rows' : ''} of ${path.relative(process.cwd(), doc)}`);
}

/** Numbers as the reports print them. */
export const fmt = {
  int: (n) => (n === undefined || !Number.isFinite(n) ? '—' : Math.round(n).toLocaleString('en-US')),
  fixed: (n, digits) =>
    n === undefined || !Number.isFinite(n)
      ? '—'
      : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }),
  ms: (n) =>
    n === undefined || !Number.isFinite(n) ? '—' : n >= 100 ? `${Math.round(n)} ms` : n >= 10 ? `${n.toFixed(1)} ms` : `${n.toFixed(2)} ms`,
  ratio: (a, b) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : '—'),
};

/** A plain-text table: a header row and rows of cells, columns padded. */
export function textTable(head, rows) {
  const widths = head.map((c, i) => Math.max(String(c).length, ...rows.map((r) => String(r[i] ?? '').length)));
  const line = (cells) => cells.map((c, i) => String(c ?? '').padEnd(widths[i])).join(' | ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map(line)].join('\n');
}

/** A markdown table; `align` per column: 'l' or 'r'. */
export function markdownTable(head, rows, align = head.map((_, i) => (i === 0 ? 'l' : 'r'))) {
  return [
    `| ${head.join(' | ')} |`,
    `| ${align.map((a) => (a === 'r' ? '---:' : '---')).join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}
