// The meta leader's load from the front ends' routing reads, with and
// without follower reads (decision 0024), in one run: a meta group of three
// control-plane processes over one cell of 3 replicas; `--followers` routing
// followers in this process, each as a router's routing source does it
// (long poll GET /v1/routing?sinceVersion&waitMs=30000, then GET /v1/fleet
// after each new version), spread over the three instances as the launcher
// spreads front ends; a writer creating one tenant every `--write-ms`. The
// CPU of every control-plane process is read from /proc over the writing
// window. Rounds alternate `--no-follower-reads` and the default, each on a
// fresh meta group.
//   node tools/bench/src/cp-follower-reads.mjs [--followers 30] [--seconds 20] [--write-ms 200] [--rounds 2]
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import {
  planControlPlanes,
  planFleet,
  spawnPlanned,
  spawnReplica,
  stopAll,
  waitForControlPlane,
  waitForLeader,
  writeCellsFile,
} from '@fencer/fleet';
import { freeFleetPortBase } from '@fencer/fleet/testing';
import { procCpuSeconds } from './measure.mjs';

const opts = new Command('cp-follower-reads')
  .option('--followers <n>', 'routing followers (front ends)', Number, 30)
  .option('--seconds <n>', 'writing window', Number, 20)
  .option('--write-ms <n>', 'one tenant created every this many ms', Number, 200)
  .option('--rounds <n>', 'pairs of rounds (forwarded, then follower reads)', Number, 2)
  .parse()
  .opts();

async function getJson(url, signal) {
  const res = await fetch(url, { signal });
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
}

/** One front end's routing source: long polls, and the fleet after every new version, until `stop`. */
async function follow(base, stop, counts) {
  let version = -1;
  while (!stop.aborted) {
    try {
      const q = version < 0 ? '' : `?sinceVersion=${version}&waitMs=30000`;
      const t = await getJson(`${base}/v1/routing${q}`, stop);
      counts.polls++;
      if (t.version !== version) {
        version = t.version;
        await getJson(`${base}/v1/fleet`, stop);
        counts.fleets++;
      }
    } catch {
      if (stop.aborted) return;
      counts.errors++;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function round(followerReads, r) {
  const portBase = await freeFleetPortBase(1, 3, 0, 0, 3);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fencer-cp-reads-'));
  const plan = planFleet({ cells: 1, replicas: 3, portBase, dataDir, extraArgs: ['--managed'], env: { FENCER_LOG_LEVEL: 'warn' } });
  const cellsFile = writeCellsFile(path.join(dataDir, 'cells.json'), plan);
  const cps = planControlPlanes({
    count: 3,
    portBase,
    dataDir,
    cellsFile,
    adminTokenFile: path.join(dataDir, 'admin-token'),
    extraArgs: followerReads ? [] : ['--no-follower-reads'],
    env: { FENCER_LOG_LEVEL: 'warn' },
  });
  const logDir = path.join(dataDir, 'logs');
  const children = plan[0].replicas.map((p) => spawnReplica(p, { logDir }));
  try {
    await waitForLeader(plan[0].replicas, 120_000);
    // Auth is off: the instances need not wait for the first one's admin token file.
    for (const c of cps) children.push(spawnPlanned(c, { logDir }));
    await Promise.all(cps.map((c) => waitForControlPlane(c.url, 120_000)));
    const roles = await Promise.all(cps.map((c) => getJson(`${c.url}/v1/health`).then((h) => h.role)));
    const stop = new AbortController();
    const counts = { polls: 0, fleets: 0, errors: 0 };
    const loops = Array.from({ length: opts.followers }, (_, i) => follow(cps[i % 3].url, stop.signal, counts));
    await new Promise((r) => setTimeout(r, 3_000));
    const before = cps.map((c) => procCpuSeconds(c.pid));
    const until = Date.now() + opts.seconds * 1000;
    let created = 0;
    for (let i = 0; Date.now() < until; i++) {
      const res = await fetch(`${cps[0].url}/v1/tenants`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ namespace: `r${r}t${i}`, cell: 'cell-1' }),
      });
      if (res.status === 201) created++;
      await new Promise((res2) => setTimeout(res2, opts.writeMs));
    }
    const cpuMs = cps.map((c, i) => ((procCpuSeconds(c.pid) ?? 0) - (before[i] ?? 0)) * 1000);
    stop.abort();
    await Promise.allSettled(loops);
    const leader = roles.indexOf('leader');
    const followersMs = cpuMs.filter((_, i) => i !== leader).reduce((a, b) => a + b, 0);
    return { followerReads, created, ...counts, leaderMs: cpuMs[leader], followersMs, load: os.loadavg()[0] };
  } catch (e) {
    for (const c of cps) {
      const log = path.join(logDir, `${c.id}.log`);
      if (existsSync(log)) console.error(`--- ${c.id}\n${readFileSync(log, 'utf8').split('\n').slice(-8).join('\n')}`);
    }
    throw e;
  } finally {
    await stopAll(children);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const rows = [];
for (let r = 0; r < opts.rounds; r++)
  for (const followerReads of [false, true]) rows.push(await round(followerReads, `${r}${followerReads ? 'f' : 'l'}`));
console.log(`${opts.followers} routing followers over 3 instances, one tenant every ${opts.writeMs} ms for ${opts.seconds} s`);
console.log('reads     tenants  polls  fleets  errors  leader CPU ms  per tenant  followers CPU ms  load');
for (const x of rows) {
  console.log(
    [
      (x.followerReads ? 'follower' : 'leader').padEnd(8),
      String(x.created).padStart(8),
      String(x.polls).padStart(6),
      String(x.fleets).padStart(7),
      String(x.errors).padStart(7),
      x.leaderMs.toFixed(0).padStart(14),
      (x.leaderMs / Math.max(1, x.created)).toFixed(1).padStart(11),
      x.followersMs.toFixed(0).padStart(17),
      x.load.toFixed(1).padStart(5),
    ].join(' '),
  );
}
