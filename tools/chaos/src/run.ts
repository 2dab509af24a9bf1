/**
 * One chaos run: a five-replica cell behind fault proxies, a fenced
 * resource, client worker processes running every workload together, the
 * nemesis for `seconds`, then heal, stop, read the final logs back and run
 * every checker on the recorded history. The nemesis draws its faults, or
 * (`schedule`) starts them at fixed times. The report carries the figures
 * (operations, faults by kind, leader changes, expiries, checker times), the
 * violations, and where the history and the fault schedule are, with the
 * command that reruns the same seed.
 */
import { CheckBook } from './check/book.js';
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SeededRandom, assert } from '@fencer/base';
import { cellNodeBuilt, waitForLeader } from '@fencer/fleet';
import { type ChaosBug, ChaosCell, FAKETIME_LIB, faketimeAvailable, fiuAvailable, FIU_RUN } from './cell.js';
import { type FinalLogs, readFinalLogs } from './final-log.js';
import { type History, type OpTally, loadHistory, opsByKind } from './history.js';
import { CONVERGE_MS_MAX, LINEARIZABILITY_STATES_MAX } from './limits.js';
import {
  FULL_NEMESIS,
  SOAK_NEMESIS,
  type FaultKind,
  type FaultRecord,
  faultsLeftOut,
  Nemesis,
  type ScheduledFault,
  type WorkerProcess,
} from './nemesis.js';
import { LinkProxy } from './proxy.js';
import type { ResourceState } from './resource.js';
import { WORKER_CONFIG_ENV, type WorkerConfig } from './workload-config.js';
import { buildLockHistories, type LeaderSample, leaderTimelineClock } from './check/lock-history.js';
import { CLOCK_RATE_ENV, monoNowMs } from './history.js';
import { type LinearizabilityResult, checkLock } from './check/linearizability.js';
import { checkTokens } from './check/tokens.js';
import { checkResource, type ResourceReport } from './check/resource-check.js';
import { type CanonicalLog, checkWatches, watchSnapshotQueries, type WatchReport } from './check/watch-check.js';
import { checkGrantsInLog, type LogGrantReport } from './check/log-check.js';
import { checkExpiryPromises, type ExpiryPromiseReport } from './check/expiry-promise.js';

/** full: processes, network, clients; soak: full plus clock-rate skew and disk faults under fiu. */
export type NemesisMode = 'full' | 'soak' | 'client-pauses' | 'none';

export interface ChaosOptions {
  readonly seconds: number;
  readonly seed: number;
  /** Where data, logs, history and the report go (default: a new temporary directory). */
  readonly workDir?: string;
  readonly replicas?: number;
  readonly workers?: number;
  /** The resource checks tokens (false: the negative control). */
  readonly fence?: boolean;
  readonly nemesis?: NemesisMode;
  /** Relative weights of the nemesis's faults, replacing the mode's (for runs that make one bug observable). */
  readonly weights?: Readonly<Partial<Record<FaultKind, number>>>;
  /** Faults started at fixed times instead of drawn (a directed scenario); the mode and weights then draw nothing. */
  readonly schedule?: readonly ScheduledFault[];
  /** One client worker (the last) runs under faketime at this clock rate (its library's timers, lease and heartbeats skewed). */
  readonly clientClockRate?: number;
  /** A planted cell bug every replica runs with (the checkers must catch it). */
  readonly bug?: ChaosBug;
  readonly snapshotEveryEntries?: number;
  readonly ttlMs?: number;
  /** Seconds between nemesis actions, as a range. */
  readonly nemesisIntervalMs?: readonly [number, number];
  readonly lockLoops?: number;
  readonly counterLoops?: number;
  readonly churnLoops?: number;
  readonly watchLoops?: number;
  readonly counterWorkMs?: readonly [number, number];
  readonly counterNames?: number;
  readonly abandonRate?: number;
  /** Search states per lock name before the linearizability checker gives up (a timeout). */
  readonly statesMax?: number;
  /** Delete the work directory after a run without violations. */
  readonly cleanOnSuccess?: boolean;
  readonly log?: (line: string) => void;
}

export interface ChaosFigures {
  readonly seconds: number;
  readonly clientOps: number;
  readonly lockServiceOps: number;
  readonly opsByKind: Record<string, OpTally>;
  readonly fencedWrites: number;
  readonly leaderChangesSeen: number;
  readonly termsInLog: number;
  readonly expiriesInLog: number;
  readonly expiriesSeenByClients: number;
  /** Sessions with an acknowledged heartbeat, and those of them whose end other clients' grants show (judged against the promise). */
  readonly expiryPromises: { readonly promised: number; readonly judged: number; readonly slackMsMin: number | null };
  readonly sessionsAbandoned: number;
  readonly faultsByKind: Partial<Record<FaultKind, number>>;
  /** Replicas that exited by themselves under an armed disk fault (each must be a clean exit 1). */
  readonly diskFaultExits: number;
  /** The clock rate of the last client worker (1: not skewed). */
  readonly clientClockRate: number;
  readonly watchStreams: number;
  readonly watchEvents: number;
  readonly logEntries: number;
  readonly logFloor: number;
  readonly commandsInLog: Record<string, number>;
  readonly checkerMs: Record<string, number>;
  readonly linearizability: { readonly names: number; readonly events: number; readonly statesVisited: number; readonly slowest: string };
  readonly grantsCheckedInLog: number;
  readonly grantsCompacted: number;
  /**
   * The transport's fast path (decision 0021): whether the cell nodes ran
   * with the connection-loss pre-vote (cell-node wires every peer link's
   * close or reset to the replica; Raft's PreVote and CheckQuorum are on by
   * default), off only under the planted bug that campaigns without it.
   */
  readonly connectionLossPreVote: boolean;
  /** After each kill -9 of a leader: ms until another replica led at a higher term (null: not seen within the watch). */
  readonly failoverMs: ReadonlyArray<number | null>;
}

export interface ChaosReport {
  readonly ok: boolean;
  readonly seed: number;
  readonly workDir: string;
  readonly historyDir: string;
  readonly scheduleFile: string;
  readonly reportFile: string;
  readonly rerun: string;
  readonly figures: ChaosFigures;
  /** Every violation found, grouped by checker (empty groups left out). */
  readonly violations: Record<string, string[]>;
  readonly violationCount: number;
  /** Whether the linearizability search ran out of budget on some name (counts as a failure). */
  readonly checkerTimedOut: boolean;
  readonly faults: readonly FaultRecord[];
  readonly resource?: ResourceReport;
  readonly watch?: WatchReport;
  readonly logGrants?: LogGrantReport;
}

const here = path.dirname(fileURLToPath(import.meta.url));
/** Compiled entry points (child processes run compiled code: Node 20 runs no TypeScript). */
export const WORKER_MAIN = path.resolve(here, '../dist/worker.js');
export const RESOURCE_MAIN = path.resolve(here, '../dist/resource.js');

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function getJson<T>(url: string): Promise<T> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve(JSON.parse(text) as T));
      })
      .on('error', reject);
  });
}

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * A replica that met an armed disk fault must have exited with code 1, no
 * signal, after saying why (the storage-failure line): never a crash or an
 * assertion. One such line per fault exit is looked for in its log.
 */
function diskFaultProblems(exits: ChaosCell['faultExits'], logDir: string): string[] {
  const problems: string[] = [];
  const exitsById = new Map<string, number>();
  for (const e of exits) {
    exitsById.set(e.id, (exitsById.get(e.id) ?? 0) + 1);
    if (e.code !== 1 || e.signal !== null)
      problems.push(
        `replica ${e.id} under "${e.fault}" exited with code ${e.code}, signal ${e.signal} instead of a clean exit 1: see ${logDir}`,
      );
  }
  for (const [id, n] of exitsById) {
    const file = path.join(logDir, `${id}.log`);
    const said = existsSync(file) ? readFileSync(file, 'utf8').split('storage failure (fsync is never retried): exiting:').length - 1 : 0;
    if (said < n) problems.push(`replica ${id} exited ${n} times on a disk fault but said "storage failure" ${said} times: see ${file}`);
  }
  return problems;
}

export function rerunCommand(o: ChaosOptions): string {
  const parts = [`npm run chaos -- --seconds ${o.seconds} --seed ${o.seed}`];
  if (o.fence === false) parts.push('--no-fence');
  if (o.nemesis && o.nemesis !== 'full') parts.push(`--nemesis ${o.nemesis}`);
  if (o.bug) parts.push(`--bug ${o.bug}`);
  if (o.clientClockRate !== undefined) parts.push(`--client-clock-rate ${o.clientClockRate}`);
  if (o.weights) parts.push(`--weights '${JSON.stringify(o.weights)}'`);
  if (o.schedule) parts.push(`--schedule '${JSON.stringify(o.schedule)}'`);
  if (o.snapshotEveryEntries !== undefined) parts.push(`--snapshot-every-entries ${o.snapshotEveryEntries}`);
  if (o.nemesisIntervalMs !== undefined) parts.push(`--nemesis-interval-ms ${o.nemesisIntervalMs.join(',')}`);
  return parts.join(' ');
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  assert(o.seconds > 0 && Number.isSafeInteger(o.seed), 'seconds > 0 and an integer seed');
  assert(cellNodeBuilt(), 'apps/cell-node is not built: run `npx nx run-many -t build` first');
  const log = o.log ?? ((line: string) => console.log(line));
  const workDir = o.workDir ?? mkdtempSync(path.join(tmpdir(), 'fencer-chaos-'));
  const dataDir = path.join(workDir, 'data');
  const logDir = path.join(workDir, 'logs');
  const historyDir = path.join(workDir, 'history');
  for (const d of [dataDir, logDir, historyDir]) mkdirSync(d, { recursive: true });
  const scheduleFile = path.join(workDir, 'faults.jsonl');
  const reportFile = path.join(workDir, 'report.json');
  writeFileSync(scheduleFile, '');
  const random = new SeededRandom(o.seed);
  const replicas = o.replicas ?? 5;
  const workerCount = o.workers ?? 4;
  const ttlMs = o.ttlMs ?? 3_000;
  const fence = o.fence ?? true;
  const nemesisMode = o.nemesis ?? 'full';
  const rerun = rerunCommand(o);
  // The soak skews one client's clock too (x0.5 or x2), unless told otherwise.
  const clientClockRate = o.clientClockRate ?? (nemesisMode === 'soak' && faketimeAvailable() ? random.pick([0.5, 2]) : 1);
  const extraArgs = [
    '--ttl-min-ms',
    '2000',
    '--snapshot-every-entries',
    String(o.snapshotEveryEntries ?? 1_000_000),
    '--watch-history-max',
    '20000',
    '--watch-progress-ms',
    '1000',
  ];
  const cell = new ChaosCell({ replicas, dataDir, logDir, extraArgs, random: random.fork(), ...(o.bug ? { bug: o.bug } : {}) });
  const children: ChildProcess[] = [];
  const clientLinks: LinkProxy[] = [];
  const workers: WorkerProcess[] = [];
  let resource: ChildProcess | undefined;
  /** When the workload starts (the nemesis runs `seconds` from here; the fault schedule counts from here). */
  let t0 = Date.now();
  if (!faketimeAvailable() && process.env['CI'] === 'true') {
    throw new Error('chaos: faketime is not installed (Debian package faketime); CI=true requires its clock-shift restarts');
  }
  if (!fiuAvailable() && process.env['CI'] === 'true') {
    throw new Error(`chaos: fiu-run is not installed at ${FIU_RUN} (Debian package fiu-utils); CI=true requires its disk faults`);
  }
  assert(
    clientClockRate === 1 || faketimeAvailable(),
    `a client clock rate of x${clientClockRate} needs Debian faketime (apt-get install faketime); .ci/run installs it`,
  );
  log(`chaos: seed ${o.seed}, ${o.seconds} s, work dir ${workDir}`);
  let resourceState: ResourceState | undefined;
  let converged: Awaited<ReturnType<ChaosCell['converge']>> = { ok: false, why: 'not reached' };
  let crashes: ReturnType<ChaosCell['crashed']> = [];
  const leaderTerms = new Set<string>();
  const leaderSamples: LeaderSample[] = [];
  /** The fastest clock of any replica (leader or not) at each poll: a promise's span is judged at the fastest clock that could have expired it. */
  const rateSamples: LeaderSample[] = [];
  let nemesis: Nemesis | undefined;
  const workerProblems: string[] = [];
  try {
    await cell.start();
    await waitForLeader(cell.replicas, 60_000);

    // execArgv: []: a test runner's flags (its source-condition resolution) must not reach compiled children.
    resource = fork(RESOURCE_MAIN, fence ? [] : ['--no-fence'], {
      execArgv: [],
      stdio: ['ignore', 'ignore', openSync(path.join(logDir, 'resource.log'), 'a'), 'ipc'],
    });
    const resourcePort = await new Promise<number>((resolve, reject) => {
      resource!.once('message', (m: { port: number }) => resolve(m.port));
      resource!.once('exit', (code) => reject(new Error(`resource exited with ${code}`)));
    });

    for (let w = 0; w < workerCount; w++) {
      const id = `w${w + 1}`;
      const links: LinkProxy[] = [];
      for (const r of cell.replicas) {
        const [host, port] = r.grpc.split(':');
        const p = new LinkProxy(`${id}->${r.id}`, host!, Number(port), random.fork());
        await p.start();
        links.push(p);
        clientLinks.push(p);
      }
      const cfg: WorkerConfig = {
        id,
        seed: random.nextU32(),
        historyFile: path.join(historyDir, `${id}.jsonl`),
        endpoints: links.map((l) => l.address),
        hintMap: Object.fromEntries(cell.replicas.map((r, i) => [r.grpc, links[i]!.address])),
        resourceUrl: `http://127.0.0.1:${resourcePort}`,
        ttlMs,
        lockNamespaces: ['alpha', 'beta', 'gamma'],
        namesPerNamespace: 15,
        counterNamespace: 'ctr',
        counterNames: o.counterNames ?? 4,
        lockLoops: o.lockLoops ?? 6,
        counterLoops: o.counterLoops ?? 1,
        churnLoops: o.churnLoops ?? 1,
        watchLoops: o.watchLoops ?? 1,
        counterWorkMs: o.counterWorkMs ?? [30, 200],
        abandonRate: o.abandonRate ?? 0.3,
      };
      const stderr = openSync(path.join(logDir, `${id}.log`), 'a');
      const skewed = clientClockRate !== 1 && w === workerCount - 1;
      const clockEnv = skewed
        ? { LD_PRELOAD: FAKETIME_LIB, FAKETIME: `+0 x${clientClockRate}`, [CLOCK_RATE_ENV]: String(clientClockRate) }
        : {};
      const child = fork(WORKER_MAIN, [], {
        execArgv: [],
        env: { ...process.env, ...clockEnv, [WORKER_CONFIG_ENV]: JSON.stringify(cfg) },
        stdio: ['ignore', stderr, stderr, 'ipc'],
      });
      if (skewed) {
        child.on('message', (m: { clockAnchorPlease?: boolean }) => {
          if (m.clockAnchorPlease === true) child.send({ clockAnchorMs: monoNowMs() });
        });
      }
      children.push(child);
      workers.push({ id, child, links, paused: false });
    }

    t0 = Date.now();
    // Leader changes as the admin API shows them: each distinct (term, leader) pair.
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const st = await cell.statuses(400);
        const t = monoNowMs();
        rateSamples.push({ t, leader: '*', rate: Math.max(1, ...cell.ids.map((id) => cell.rateOf(id))) });
        for (const s of st.values()) {
          if (s.role !== 'leader') continue;
          leaderTerms.add(`${s.term}/${s.nodeId}`);
          leaderSamples.push({ t, leader: s.nodeId, rate: cell.rateOf(s.nodeId) });
        }
        await sleep(1_000);
      }
    })();

    const weights = o.schedule
      ? {}
      : (o.weights ??
        (nemesisMode === 'full'
          ? FULL_NEMESIS
          : nemesisMode === 'soak'
            ? SOAK_NEMESIS
            : nemesisMode === 'client-pauses'
              ? { 'pause-client': 1 }
              : {}));
    // Said once per run: a fault whose Debian tool is missing is never drawn.
    for (const line of faultsLeftOut(weights)) log(`chaos: nemesis: ${line}`);
    nemesis = new Nemesis({
      cell,
      workers,
      random: random.fork(),
      ttlMs,
      weights,
      intervalMs: o.nemesisIntervalMs ?? (nemesisMode === 'client-pauses' ? [ttlMs + 4_000, ttlMs + 6_000] : [1_500, 4_000]),
      scheduleFile,
      t0Ms: t0,
    });
    if (o.schedule) await nemesis.runSchedule(o.schedule, t0 + o.seconds * 1000);
    else await nemesis.run(t0 + o.seconds * 1000);
    log(`chaos: nemesis done after ${((Date.now() - t0) / 1000).toFixed(1)} s; stopping the workers`);

    // Workers close their sessions and exit; a worker that hangs is killed (its open operations stay unknown).
    for (const w of workers) w.child.send('stop');
    for (const w of workers) {
      if (!(await waitExit(w.child, 45_000))) {
        workerProblems.push(`${w.id} did not stop within 45 s after the run; killed`);
        w.child.kill('SIGKILL');
        await waitExit(w.child, 5_000);
      } else if (w.child.exitCode !== 0) {
        workerProblems.push(`${w.id} exited with ${w.child.exitCode ?? w.child.signalCode} (see ${path.join(logDir, `${w.id}.log`)})`);
      }
    }
    crashes = cell.crashed();
    resourceState = await getJson<ResourceState>(`http://127.0.0.1:${resourcePort}/state`);
    resource.send('stop');
    await waitExit(resource, 5_000);
    converged = await cell.converge(CONVERGE_MS_MAX);
    polling = false;
    await poller;
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    if (resource && resource.exitCode === null) resource.kill('SIGKILL');
    await cell.stop();
    await Promise.all(clientLinks.map((p) => p.close()));
  }

  // ---- checks ----
  const book = new CheckBook();
  const { violations, checkerMs } = book;
  const flag = book.flag.bind(book);
  const timed = <T>(name: string, fn: () => T): T => book.timed(name, fn);
  flag('disk faults', diskFaultProblems(cell.faultExits, logDir));
  flag('leader disrupted', nemesis?.disruptions ?? []);
  flag('processes', [
    ...crashes.map((c) => `replica ${c.id} exited by itself (code ${c.code}, signal ${c.signal}): see ${logDir}`),
    ...workerProblems,
  ]);
  if (!converged.ok) flag('convergence', [`the healed cell did not converge within ${CONVERGE_MS_MAX} ms: ${converged.why}`]);

  const history: History = timed('load history', () => loadHistory(historyDir));
  let finalLogs: FinalLogs | undefined;
  if (converged.ok) {
    const started = performance.now();
    finalLogs = await readFinalLogs(
      cell.replicas.map((r) => ({ id: r.id, dataDir: r.dataDir })),
      converged.commitIndex,
      watchSnapshotQueries(history.watches),
    );
    checkerMs['final logs'] = Math.round(performance.now() - started);
    flag('final logs', finalLogs.problems);
  }

  const lockHistories = timed('build lock histories', () => buildLockHistories(history, leaderTimelineClock(leaderSamples)));
  flag(
    'expiry',
    lockHistories.earlyEnds.map(
      (w) =>
        `session ${w.s} ended (seen at ${w.end.toFixed(1)}) before its TTL of ${w.ttl} ms had passed since its last acknowledged heartbeat (not before ${w.expiryNotBefore.toFixed(1)}, by the fastest leader clock then, less the allowed drift) and before any close`,
    ),
  );
  flag(
    'odd failures',
    lockHistories.oddFailures.slice(0, 20).map((op) => `${op.p}#${op.id} ${JSON.stringify(op.op)} failed with ${op.code}`),
    lockHistories.oddFailures.length,
  );
  const results: LinearizabilityResult[] = timed('linearizability', () =>
    [...lockHistories.byName.entries()].map(([name, events]) =>
      checkLock(name, events, lockHistories.expectations, o.statesMax ?? LINEARIZABILITY_STATES_MAX),
    ),
  );
  const checkerTimedOut = results.some((r) => r.timedOut);
  flag(
    'linearizability',
    results.filter((r) => !r.ok).map((r) => `${r.name}${r.timedOut ? ' (checker timeout)' : ''}: ${r.detail}`),
  );
  const tokens = timed('tokens', () => checkTokens(history));
  flag('tokens', tokens.violations, tokens.violationCount);
  const resourceReport = resourceState ? timed('resource', () => checkResource(history, resourceState!)) : undefined;
  if (resourceReport) flag('resource', resourceReport.violations, resourceReport.violationCount);
  else flag('resource', ['the resource state could not be read']);
  // The skewed client's times reach real time through an anchor that reads late by its IPC latency: not judged.
  const skewedClients = new Set(clientClockRate !== 1 ? [`w${workerCount}`] : []);
  const promises: ExpiryPromiseReport = timed('expiry promises', () =>
    checkExpiryPromises(history, finalLogs?.replay.expiredAt ?? new Map(), leaderTimelineClock(rateSamples), skewedClients),
  );
  flag('expiry', promises.violations, promises.violationCount);
  let watchReport: WatchReport | undefined;
  let logGrants: LogGrantReport | undefined;
  if (finalLogs) {
    const canonical: CanonicalLog = {
      floor: finalLogs.canonical.firstIndex,
      last: finalLogs.commonIndex,
      events: finalLogs.replay.events,
      snapshots: finalLogs.replay.snapshots,
    };
    watchReport = timed('watch', () => checkWatches(history.watches, canonical));
    flag('watch', watchReport.violations, watchReport.violationCount);
    logGrants = timed('grants in log', () => checkGrantsInLog(history, canonical));
    flag('grants in log', logGrants.violations, logGrants.violationCount);
  }
  if (history.badLines > 0) flag('history', [`${history.badLines} history lines did not parse`]);

  // ---- figures ----
  const lockServiceOps = history.ops.filter((op) => !op.op.f.startsWith('ctr-')).length;
  let expiriesSeen = 0;
  let abandoned = 0;
  for (const w of lockHistories.sessions.values()) if (w.end < Infinity && w.closeInvoked === Infinity) expiriesSeen++;
  for (const f of history.sessions.values()) if (f.abandonedMs < Infinity) abandoned++;
  const slowest = [...results].sort((a, b) => b.statesVisited - a.statesVisited)[0];
  const figures: ChaosFigures = {
    seconds: o.seconds,
    clientOps: history.ops.length,
    lockServiceOps,
    opsByKind: opsByKind(history.ops),
    fencedWrites: resourceReport?.acceptedWrites ?? 0,
    leaderChangesSeen: Math.max(0, leaderTerms.size - 1),
    termsInLog: finalLogs?.replay.terms.size ?? 0,
    expiriesInLog: finalLogs?.replay.okKinds.ExpireSession ?? 0,
    expiriesSeenByClients: expiriesSeen,
    expiryPromises: {
      promised: promises.promises,
      judged: promises.judged,
      slackMsMin: Number.isFinite(promises.slackMsMin) ? Math.round(promises.slackMsMin) : null,
    },
    sessionsAbandoned: abandoned,
    faultsByKind: nemesis?.started ?? {},
    diskFaultExits: cell.faultExits.length,
    clientClockRate,
    watchStreams: history.watches.length,
    watchEvents: watchReport?.events ?? 0,
    logEntries: finalLogs?.commonIndex ?? 0,
    logFloor: finalLogs?.canonical.firstIndex ?? 0,
    commandsInLog: finalLogs?.replay.kinds ?? {},
    checkerMs,
    linearizability: {
      names: results.length,
      events: results.reduce((s, r) => s + r.events, 0),
      statesVisited: results.reduce((s, r) => s + r.statesVisited, 0),
      slowest: slowest ? `${slowest.name}: ${slowest.events} events, ${slowest.statesVisited} states` : '',
    },
    grantsCheckedInLog: logGrants?.checked ?? 0,
    grantsCompacted: logGrants?.compacted ?? 0,
    connectionLossPreVote: o.bug !== 'campaignWithoutPreVoteOnConnectionLoss',
    failoverMs: nemesis?.failoverMs ?? [],
  };
  const ok = book.violationCount === 0 && !checkerTimedOut;
  const report: ChaosReport = {
    ok,
    seed: o.seed,
    workDir,
    historyDir,
    scheduleFile,
    reportFile,
    rerun,
    figures,
    violations,
    violationCount: book.violationCount,
    checkerTimedOut,
    faults: nemesis?.records ?? [],
    ...(resourceReport ? { resource: resourceReport } : {}),
    ...(watchReport ? { watch: watchReport } : {}),
    ...(logGrants ? { logGrants } : {}),
  };
  writeFileSync(reportFile, `${JSON.stringify(report, null, 2)}\n`);
  if (ok && o.cleanOnSuccess) rmSync(path.join(workDir, 'data'), { recursive: true, force: true });
  return report;
}

/** A short human summary; on failure it names the history, the fault schedule and the rerun command. */
export function summarize(r: ChaosReport): string {
  const f = r.figures;
  const lines = [
    `chaos ${r.ok ? 'PASSED' : 'FAILED'}: seed ${r.seed}, ${f.seconds} s`,
    `  client operations ${f.clientOps} (lock service ${f.lockServiceOps}); fenced writes ${f.fencedWrites}; watch streams ${f.watchStreams} (${f.watchEvents} events)`,
    `  leader changes seen ${f.leaderChangesSeen}, terms in the log ${f.termsInLog}; expiries in the log ${f.expiriesInLog}, seen by clients ${f.expiriesSeenByClients}, abandoned ${f.sessionsAbandoned}; heartbeat promises ${f.expiryPromises.promised} (${f.expiryPromises.judged} judged against other clients' grants, least margin ${f.expiryPromises.slackMsMin ?? '-'} ms)`,
    `  faults: ${
      Object.entries(f.faultsByKind)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }; replicas that exited on a disk fault ${f.diskFaultExits}; last client's clock rate x${f.clientClockRate}`,
    `  log: ${f.logEntries} entries (from ${f.logFloor}); grants checked in the log ${f.grantsCheckedInLog}, compacted ${f.grantsCompacted}`,
    `  connection-loss pre-vote ${f.connectionLossPreVote ? 'on' : 'OFF (planted bug)'}; failover after kill -9 of the leader (ms): ${f.failoverMs.map((ms) => ms ?? 'not seen').join(', ') || 'no leader killed'}`,
    `  checkers (ms): ${Object.entries(f.checkerMs)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )}; linearizability ${f.linearizability.names} names, ${f.linearizability.events} events, ${f.linearizability.statesVisited} states (slowest ${f.linearizability.slowest})`,
  ];
  if (!r.ok) {
    lines.push(`  ${r.violationCount} violations${r.checkerTimedOut ? ' (a checker timed out)' : ''}:`);
    for (const [group, list] of Object.entries(r.violations)) for (const v of list.slice(0, 10)) lines.push(`    [${group}] ${v}`);
    lines.push(`  history: ${r.historyDir}`, `  fault schedule: ${r.scheduleFile}`, `  report: ${r.reportFile}`, `  rerun: ${r.rerun}`);
  }
  return lines.join('\n');
}
