#!/usr/bin/env node
// The local fleet's footprint, as the README states it: runs the launcher
// behind `npm start` (arguments pass through; the build must exist), reads
// its "up in" time, lets the fleet settle, then samples every process it
// started from /proc for a while with no client traffic: CPU (user+system
// ticks) per process and in all, and resident memory. Stops the fleet with
// SIGTERM and prints a table.
//
//   node tools/fleet/footprint.mjs [--settle-s 10] [--sample-s 30] [-- launcher args]
// Linux only (/proc). Uses a fresh temporary data folder and a block of
// ports free now (reserved as the tests reserve theirs) unless the launcher
// arguments say otherwise.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { freeFleetPortBase } from './test-cell.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const own = dash >= 0 ? argv.slice(0, dash) : argv;
const passed = dash >= 0 ? argv.slice(dash + 1) : [];
const option = (n, d) => (own.indexOf(n) >= 0 ? Number(own[own.indexOf(n) + 1]) : d);
const settleS = option('--settle-s', 10);
const sampleS = option('--sample-s', 30);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fencer-footprint-'));
/** A launcher flag's value among the passed arguments, or its default. */
const launcherOption = (n, d) => (passed.indexOf(n) >= 0 ? Number(passed[passed.indexOf(n) + 1]) : d);
const portBase = passed.includes('--port-base')
  ? undefined
  : await freeFleetPortBase(
      launcherOption('--cells', 2),
      launcherOption('--replicas', 5),
      launcherOption('--routers', 1),
      launcherOption('--proxies', 2),
      launcherOption('--control-planes', 1),
    );
const args = [
  ...(passed.includes('--data-dir') ? [] : ['--data-dir', dataDir]),
  ...(portBase === undefined ? [] : ['--port-base', String(portBase)]),
  ...passed,
];
const ticksPerSecond = 100; // USER_HZ on Linux
const pageBytes = 4096;

const launcher = spawn(process.execPath, [path.join(root, 'tools/fleet/launch.mjs'), ...args], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
});
let out = '';
const upS = await new Promise((resolve, reject) => {
  launcher.stdout.on('data', (d) => {
    out += d;
    const m = /Fencer is up in ([\d.]+) s/.exec(out);
    if (m) resolve(Number(m[1]));
  });
  launcher.on('exit', (code) => reject(new Error(`the launcher exited (${code}) before the fleet was up:\n${out}`)));
});

/** Every descendant of `pid`, from /proc's parent links. */
function descendants(pid) {
  const parent = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found = [];
  const walk = (p) => {
    for (const [child, par] of parent) if (par === p) (found.push(child), walk(child));
  };
  walk(pid);
  return found;
}

function sample(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  return { ticks: Number(f[11]) + Number(f[12]), rssBytes: Number(f[21]) * pageBytes, cmd };
}

/** A readable name: the process's --id (or --node-id), else its script. */
function nameOf(cmd) {
  for (const flag of ['--id', '--node-id', '--name']) {
    const i = cmd.indexOf(flag);
    if (i >= 0 && cmd[i + 1]) return cmd[i + 1];
  }
  const script = cmd.find((a) => a.endsWith('.js') || a.endsWith('.mjs'));
  return script ? path.relative(root, script) : cmd.join(' ');
}

try {
  await sleep(settleS * 1000);
  const pids = [launcher.pid, ...descendants(launcher.pid)];
  const before = new Map(pids.map((p) => [p, sample(p)]));
  const t0 = performance.now();
  await sleep(sampleS * 1000);
  const seconds = (performance.now() - t0) / 1000;
  const rows = [];
  for (const p of pids) {
    let s;
    try {
      s = sample(p);
    } catch {
      continue;
    }
    const cpuMsPerS = (((s.ticks - before.get(p).ticks) / ticksPerSecond) * 1000) / seconds;
    rows.push({ name: p === launcher.pid ? 'launcher' : nameOf(s.cmd), pid: p, cpuMsPerS, rssMiB: s.rssBytes / 2 ** 20 });
  }
  rows.sort((a, b) => a.name.localeCompare(b.name));
  const totalCpu = rows.reduce((a, r) => a + r.cpuMsPerS, 0);
  const totalRss = rows.reduce((a, r) => a + r.rssMiB, 0);
  console.log(`fleet up in ${upS.toFixed(1)} s (launcher's count, after the build); ${rows.length} processes`);
  console.log(
    `idle over ${seconds.toFixed(1)} s after ${settleS} s settling; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log('process'.padEnd(34) + 'CPU ms/s'.padStart(10) + 'RSS MiB'.padStart(10));
  for (const r of rows) console.log(r.name.padEnd(34) + r.cpuMsPerS.toFixed(1).padStart(10) + r.rssMiB.toFixed(0).padStart(10));
  console.log('all'.padEnd(34) + totalCpu.toFixed(1).padStart(10) + totalRss.toFixed(0).padStart(10));
  console.log(`idle CPU ${(totalCpu / 10).toFixed(1)}% of one core in all, RSS ${totalRss.toFixed(0)} MiB in all`);
} finally {
  launcher.kill('SIGTERM');
  await new Promise((r) => launcher.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
