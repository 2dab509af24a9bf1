// The WAL suite: appends/s and fsyncs/s of @fencer/wal on the real file
// system for 1, 16 and 64 concurrent appenders of 100-byte entries, beside
// this machine's raw write+fdatasync ceiling measured in the same run and
// directory. An appender is a loop: save one entry, wait for its callback
// (durable), save the next; group commit is what lets 64 of them share one
// fsync. The disk's fsync rate drifts within minutes, so rows are measured
// in interleaved rounds (raw, 1, 16, 64, raw, 1, ...), each row showing its
// median round.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildProject, thisBuild } from '../systems/builds.mjs';
import { common, count, numeric, resolve } from '../options.mjs';
import { commandLine, fmt, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';
import { median, quantile, sleep } from '../measure.mjs';

const ENTRY_BYTES = 100;
const APPENDERS = [1, 16, 64];
/** The raw ceiling writes round a zero-filled file of this size. */
const RAW_FILE_BYTES = 64 * 1024 * 1024;
/** Unmeasured seconds before each measured round of a store. */
const ROUND_WARMUP_S = 0.3;
/** The target at 64 appenders. */
const TARGET_APPENDS_PER_S = 50_000;
const TARGET_APPENDS_PER_FSYNC = 10;

export function register(program) {
  const cmd = program
    .command('wal')
    .description('@fencer/wal: appends/s and fsyncs/s at 1, 16, 64 appenders against the raw fdatasync ceiling');
  numeric(cmd, '--seconds <n>', 'measured seconds per row and round', 2, 0.5);
  numeric(cmd, '--rounds <n>', 'interleaved rounds; rows show their median round', 5, 1, count);
  numeric(cmd, '--syncs <n>', "the store's syncsInFlightMax (write+fdatasync cycles in flight)", 2, 2, count);
  cmd.option('--dir <dir>', 'where the files go', os.tmpdir()).option('--no-build', 'measure libs/wal as built (skip `nx build wal`)');
  common(cmd);
  cmd.action(() => runWal(resolve(cmd)));
  return cmd;
}

/** Raw ceiling: one 100-byte pwrite then fdatasync, back to back, into a zero-filled file; per second. */
function rawCeiling(fd, forSeconds) {
  const buf = Buffer.alloc(ENTRY_BYTES, 7);
  const t0 = performance.now();
  let n = 0;
  for (const until = t0 + forSeconds * 1000; performance.now() < until; n++) {
    fs.writeSync(fd, buf, 0, ENTRY_BYTES, (n * ENTRY_BYTES) % RAW_FILE_BYTES);
    fs.fdatasyncSync(fd);
  }
  return n / ((performance.now() - t0) / 1000);
}

function zeroFilled(file) {
  const fd = fs.openSync(file, 'w');
  const zeros = Buffer.alloc(1024 * 1024);
  for (let at = 0; at < RAW_FILE_BYTES; at += zeros.length) fs.writeSync(fd, zeros, 0, zeros.length, at);
  fs.fdatasyncSync(fd);
  return fd;
}

/** A store with `appenders` loops that can be run for a while and paused. */
async function appendersOn(wal, dir, appenders, walOptions) {
  const store = await new Promise((resolve, reject) =>
    wal.openRaftLogStore(new wal.NodeDisk(), dir, walOptions, (err, s) => (err ? reject(err) : resolve(s))),
  );
  // The spare segment is zero-filled in the background after open: wait until it is durable, so its
  // preallocation does not land inside a measurement.
  while (!fs.existsSync(path.join(dir, '0000000000000002.wal'))) await sleep(20);
  const data = new Uint8Array(ENTRY_BYTES).fill(42);
  let next = 1;
  const run = async (warmS, forS) => {
    let running = appenders;
    let stopping = false;
    let measuring = false;
    const latenciesMs = [];
    let allStopped;
    const stopped = new Promise((r) => (allStopped = r));
    const appendOne = () => {
      const t = performance.now();
      store.save(undefined, [{ index: next++, term: 1, type: 0, data }], (err) => {
        if (err) throw err;
        if (measuring) latenciesMs.push(performance.now() - t);
        if (!stopping) return appendOne();
        if (--running === 0) allStopped();
      });
    };
    for (let k = 0; k < appenders; k++) appendOne();
    await sleep(warmS * 1000);
    const fsyncs0 = store.stats.fsyncs;
    const t0 = performance.now();
    measuring = true;
    await sleep(forS * 1000);
    measuring = false;
    const elapsedS = (performance.now() - t0) / 1000;
    const fsyncsPerS = (store.stats.fsyncs - fsyncs0) / elapsedS;
    stopping = true;
    await stopped;
    return {
      appendsPerS: latenciesMs.length / elapsedS,
      fsyncsPerS,
      p50Ms: quantile(latenciesMs, 0.5),
      p99Ms: quantile(latenciesMs, 0.99),
    };
  };
  const close = () => new Promise((resolve, reject) => store.close((err) => (err ? reject(err) : resolve())));
  return { appenders, run, close };
}

async function measureAll(wal, work, o) {
  const walOptions = { syncsInFlightMax: o.syncs };
  const rawFd = zeroFilled(path.join(work, 'raw.dat'));
  const runners = [];
  for (const n of APPENDERS) runners.push(await appendersOn(wal, path.join(work, `wal-${n}`), n, walOptions));
  const raw = [];
  const runs = new Map(runners.map((r) => [r.appenders, []]));
  for (let round = 0; round < o.rounds; round++) {
    raw.push(rawCeiling(rawFd, o.seconds));
    for (const r of runners) runs.get(r.appenders).push(await r.run(ROUND_WARMUP_S, o.seconds));
  }
  fs.closeSync(rawFd);
  for (const r of runners) await r.close();
  const rows = runners.map((r) => {
    const all = runs.get(r.appenders);
    return {
      appenders: r.appenders,
      ...[...all].sort((x, y) => x.appendsPerS - y.appendsPerS)[all.length >> 1],
      all: all.map((x) => x.appendsPerS),
    };
  });
  return { ceiling: median(raw), raw, rows };
}

function render(meta, m, o) {
  const f0 = (n) => fmt.fixed(n, 0);
  const rows = [
    ['raw `pwrite`+`fdatasync` (ceiling)', f0(m.ceiling), f0(m.ceiling), '1', '', '', m.raw.map(f0).join(' / ')],
    ...m.rows.map((r) => [
      r.appenders,
      f0(r.appendsPerS),
      f0(r.fsyncsPerS),
      fmt.fixed(r.appendsPerS / r.fsyncsPerS, 1),
      `${fmt.fixed(r.p50Ms, 2)} ms`,
      `${fmt.fixed(r.p99Ms, 2)} ms`,
      r.all.map(f0).join(' / '),
    ]),
  ];
  const r64 = m.rows.find((r) => r.appenders === 64);
  const met = r64.appendsPerS >= TARGET_APPENDS_PER_S && r64.appendsPerS >= TARGET_APPENDS_PER_FSYNC * r64.fsyncsPerS;
  return [
    '## WAL',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 10)}: Node ${meta.node}, ${meta.cpu}, files in \`${o.dir}\`; ${o.rounds} interleaved rounds of ${o.seconds} s per row, each row showing its median round. The store runs with its defaults (64 MiB preallocated segments; group commit with ${o.syncs} write+fdatasync cycles in flight, a batch split between them when both are free, callbacks strictly in order).`,
    '',
    markdownTable(
      ['appenders', 'appends/s (median)', 'fsyncs/s', 'appends per fsync', 'p50 latency', 'p99 latency', 'appends/s, all rounds'],
      rows,
    ),
    '',
    `Target: with 64 appenders at least ${fmt.int(TARGET_APPENDS_PER_S)} appends/s and at least ${TARGET_APPENDS_PER_FSYNC}× more appends than fsyncs: ${met ? '**met**' : '**not met** on this run'}.`,
    '',
  ].join('\n');
}

export async function runWal(o) {
  if (o.build) buildProject('wal');
  const build = thisBuild();
  const wal = { ...(await import(build.lib('wal'))), ...(await import(build.lib('wal', 'node'))) };
  const meta = Object.assign(machineMeta(), { command: commandLine() });
  const work = fs.mkdtempSync(path.join(o.dir, 'fencer-wal-bench-'));
  try {
    const m = await measureAll(wal, work, o);
    meta.end();
    const body = render(meta, m, o);
    console.log(body);
    if (o.json) writeJson(o.json, { meta, opts: o, result: m });
    const r64 = m.rows.find((r) => r.appenders === 64);
    const row = {
      id: 'wal-64',
      figure: 'WAL, 64 appenders of 100-byte entries: appends/s (appends per fsync)',
      value: `${fmt.int(r64.appendsPerS)} (${fmt.fixed(r64.appendsPerS / r64.fsyncsPerS, 1)})`,
      command: meta.command,
    };
    writeDocs({ name: 'wal', body, rows: [row], keepNotes: true, write: o.write });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
