/**
 * The moves mode of the chaos harness: two managed cells and a meta group
 * of three control planes (moves-fleet.ts), client workers calling through
 * a router and heartbeating through a session proxy, a fenced resource, and
 * the moves nemesis (moves-nemesis.ts) moving tenants back and forth while
 * it kills, pauses and cuts off members of the source, the target and the
 * meta group. Then the lock-history checkers run on what clients saw:
 * linearizability per lock against the FIFO lock model (a lost acknowledged
 * grant or a reordered queue shows as a history no order explains), tokens
 * (per name in real time; revisions per namespace), the fenced resource
 * (mutual exclusion where it matters), early expiry and the heartbeat
 * promises. The per-cell log checks of the one-cell mode (final logs,
 * grants at their revision, watch streams) are not run: two cells' logs and
 * an import between them are not one log.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { CheckBook } from './check/book.js';
import { mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SeededRandom, assert } from '@fencer/base';
import { cellNodeBuilt, controlPlaneBuilt, frontendsBuilt } from '@fencer/fleet';
import { type History, type OpTally, loadHistory, opsByKind } from './history.js';
import { LINEARIZABILITY_STATES_MAX } from './limits.js';
import { MovesFleet, MOVES_REPLICAS, type MovesBug } from './moves-fleet.js';
import {
  createTenant,
  cpGet,
  MOVES_FAULT_KINDS,
  type MoveOutcome,
  MovesNemesis,
  type MovesFaultKind,
  type MovesFaultRecord,
} from './moves-nemesis.js';
import type { ResourceState } from './resource.js';
import { RESOURCE_MAIN, WORKER_MAIN } from './run.js';
import { WORKER_CONFIG_ENV, type WorkerConfig } from './workload-config.js';
import { buildLockHistories, leaderTimelineClock } from './check/lock-history.js';
import { checkLock, type LinearizabilityResult } from './check/linearizability.js';
import { checkTokens } from './check/tokens.js';
import { checkResource } from './check/resource-check.js';
import { checkExpiryPromises } from './check/expiry-promise.js';

/** Tenants the nemesis moves (both start on cell-1), and those that stay (beta on cell-1, gamma on cell-2). */
export const MOVING_TENANTS = ['alpha', 'ctr'] as const;
const STAYING: Readonly<Record<string, string>> = { beta: 'cell-1', gamma: 'cell-2' };

export interface MovesChaosOptions {
  readonly seconds: number;
  readonly seed: number;
  readonly workDir?: string;
  readonly workers?: number;
  readonly lockLoops?: number;
  /** Fault kinds the nemesis draws (default all; empty: moves only). */
  readonly faults?: readonly MovesFaultKind[];
  readonly nemesisIntervalMs?: readonly [number, number];
  /** A planted cell bug every cell node runs with (the checkers must catch it). */
  readonly bug?: MovesBug;
  /** Each cell step of a move waits this long first (--move-step-pause-ms), so faults land in every move state. */
  readonly moveStepPauseMs?: number;
  /** The first move starts this long into the run (default 5 s): the workloads first run on the tenants' first cells. */
  readonly firstMoveAfterMs?: number;
  readonly ttlMs?: number;
  readonly cleanOnSuccess?: boolean;
  readonly log?: (line: string) => void;
}

export interface MovesFigures {
  readonly seconds: number;
  readonly cells: number;
  readonly replicasPerCell: number;
  readonly controlPlanes: number;
  readonly lockServiceOps: number;
  readonly clientOps: number;
  readonly opsByKind: Record<string, OpTally>;
  readonly fencedWrites: number;
  readonly movesDone: number;
  /** Moves that failed before switching and rolled back (the source serving again). */
  readonly movesFailed: number;
  readonly unavailableMs: { readonly median: number | null; readonly max: number | null };
  readonly faultsStarted: number;
  readonly faultsByKind: Record<string, number>;
  readonly expiriesSeenByClients: number;
  readonly linearizability: { readonly names: number; readonly events: number; readonly statesVisited: number };
  readonly checkerMs: Record<string, number>;
}

export interface MovesReport {
  readonly ok: boolean;
  readonly seed: number;
  readonly workDir: string;
  readonly rerun: string;
  readonly figures: MovesFigures;
  readonly moves: readonly MoveOutcome[];
  readonly faults: readonly MovesFaultRecord[];
  readonly violations: Record<string, string[]>;
  readonly violationCount: number;
  readonly checkerTimedOut: boolean;
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

export function movesRerunCommand(o: MovesChaosOptions): string {
  const parts = [`npm run chaos -- --mode moves --seconds ${o.seconds} --seed ${o.seed}`];
  if (o.bug) parts.push(`--bug ${o.bug}`);
  if (o.faults?.length === 0) parts.push('--nemesis none');
  return parts.join(' ');
}

/** The namespace of a worker's lock name `/ls/<ns>/...`: each has its own revisions in this mode. */
function namespaceOf(name: string): string {
  return name.split('/')[2] ?? '';
}

interface Started {
  readonly fleet: MovesFleet;
  readonly resource: ChildProcess;
  readonly resourcePort: number;
  readonly workers: ChildProcess[];
}

async function startResource(logDir: string): Promise<{ child: ChildProcess; port: number }> {
  // execArgv: []: a test runner's flags must not reach compiled children.
  const child = fork(RESOURCE_MAIN, [], {
    execArgv: [],
    stdio: ['ignore', 'ignore', openSync(path.join(logDir, 'resource.log'), 'a'), 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`resource exited with ${code}`)));
  });
  return { child, port };
}

function startWorkers(
  o: MovesChaosOptions,
  fleet: MovesFleet,
  dirs: { history: string; log: string },
  port: number,
  random: SeededRandom,
): ChildProcess[] {
  const children: ChildProcess[] = [];
  for (let w = 0; w < (o.workers ?? 4); w++) {
    const id = `w${w + 1}`;
    const cfg: WorkerConfig = {
      id,
      seed: random.nextU32(),
      historyFile: path.join(dirs.history, `${id}.jsonl`),
      endpoints: [fleet.router.grpc],
      hintMap: {},
      keepAliveEndpoints: [fleet.proxy.grpc],
      frontEndResends: true,
      resourceUrl: `http://127.0.0.1:${port}`,
      ttlMs: o.ttlMs ?? 3_000,
      lockNamespaces: ['alpha', 'beta', 'gamma'],
      namesPerNamespace: 15,
      counterNamespace: 'ctr',
      counterNames: 4,
      lockLoops: o.lockLoops ?? 4,
      counterLoops: 1,
      churnLoops: 1,
      watchLoops: 0,
      counterWorkMs: [30, 200],
      abandonRate: 0.3,
    };
    const out = openSync(path.join(dirs.log, `${id}.log`), 'a');
    children.push(
      fork(WORKER_MAIN, [], {
        execArgv: [],
        env: { ...process.env, [WORKER_CONFIG_ENV]: JSON.stringify(cfg) },
        stdio: ['ignore', out, out, 'ipc'],
      }),
    );
  }
  return children;
}

async function stopWorkers(workers: ChildProcess[], problems: string[]): Promise<void> {
  for (const w of workers) w.send('stop');
  for (const [i, w] of workers.entries()) {
    if (!(await waitExit(w, 45_000))) {
      problems.push(`w${i + 1} did not stop within 45 s after the run; killed`);
      w.kill('SIGKILL');
      await waitExit(w, 5_000);
    } else if (w.exitCode !== 0) {
      problems.push(`w${i + 1} exited with ${w.exitCode ?? w.signalCode}`);
    }
  }
}

/** After the run: every tenant routed active, to the cell its last finished move (or its creation) names. */
async function routingProblems(fleet: MovesFleet, moves: readonly MoveOutcome[]): Promise<string[]> {
  const routing = await cpGet<{ routes: Array<{ namespace: string; cell: string; state: string }> }>(
    fleet.controlPlaneUrls,
    '/v1/routing',
    Date.now() + 30_000,
  );
  if (!routing) return ['GET /v1/routing: no instance answered within 30 s after the run'];
  const problems: string[] = [];
  for (const ns of [...MOVING_TENANTS, ...Object.keys(STAYING)]) {
    const last = [...moves].reverse().find((m) => m.namespace === ns);
    const want = last ? (last.state === 'done' ? last.toCell : last.fromCell) : (STAYING[ns] ?? 'cell-1');
    const route = routing.routes.find((r) => r.namespace === ns);
    if (!route || route.state !== 'active' || route.cell !== want)
      problems.push(`${ns}: route ${JSON.stringify(route)} after the run, expected active on ${want}`);
  }
  return problems;
}

async function startAll(
  o: MovesChaosOptions,
  dirs: { data: string; log: string; history: string },
  random: SeededRandom,
): Promise<Started> {
  const fleet = new MovesFleet({
    dataDir: dirs.data,
    logDir: dirs.log,
    random: random.fork(),
    cellArgs: ['--ttl-min-ms', '2000', '--snapshot-every-entries', '1000000'],
    controlPlaneArgs: ['--move-step-pause-ms', String(o.moveStepPauseMs ?? 200)],
    ...(o.bug ? { bug: o.bug } : {}),
  });
  try {
    await fleet.start();
    for (const ns of MOVING_TENANTS) await createTenant(fleet.controlPlaneUrls, ns, 'cell-1');
    for (const [ns, cell] of Object.entries(STAYING)) await createTenant(fleet.controlPlaneUrls, ns, cell);
    const resource = await startResource(dirs.log);
    return { fleet, resource: resource.child, resourcePort: resource.port, workers: startWorkers(o, fleet, dirs, resource.port, random) };
  } catch (e) {
    await fleet.stop();
    throw e;
  }
}

export async function runMovesChaos(o: MovesChaosOptions): Promise<MovesReport> {
  assert(o.seconds > 0 && Number.isSafeInteger(o.seed), 'seconds > 0 and an integer seed');
  assert(
    cellNodeBuilt() && frontendsBuilt() && controlPlaneBuilt(),
    'cell-node, the front ends and the control plane are built: run `npx nx run-many -t build` first',
  );
  const log = o.log ?? ((line: string) => console.log(line));
  const workDir = o.workDir ?? mkdtempSync(path.join(tmpdir(), 'fencer-chaos-moves-'));
  const dirs = { data: path.join(workDir, 'data'), log: path.join(workDir, 'logs'), history: path.join(workDir, 'history') };
  for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true });
  const scheduleFile = path.join(workDir, 'faults.jsonl');
  writeFileSync(scheduleFile, '');
  const random = new SeededRandom(o.seed);
  log(`chaos moves: seed ${o.seed}, ${o.seconds} s, work dir ${workDir}${o.bug ? `, planted bug ${o.bug}` : ''}`);
  const s = await startAll(o, dirs, random);
  const problems: string[] = [];
  let nemesis: MovesNemesis | undefined;
  let resourceState: ResourceState | undefined;
  let routeProblems: string[] = [];
  try {
    const t0 = Date.now();
    nemesis = new MovesNemesis({
      fleet: s.fleet,
      random: random.fork(),
      tenants: MOVING_TENANTS,
      intervalMs: o.nemesisIntervalMs ?? [2_000, 5_000],
      firstMoveAfterMs: o.firstMoveAfterMs ?? 5_000,
      kinds: o.faults ?? MOVES_FAULT_KINDS,
      scheduleFile,
      t0Ms: t0,
      log,
    });
    await nemesis.run(t0 + o.seconds * 1000);
    log(`chaos moves: nemesis done after ${((Date.now() - t0) / 1000).toFixed(1)} s; stopping the workers`);
    await stopWorkers(s.workers, problems);
    const res = await fetch(`http://127.0.0.1:${s.resourcePort}/state`);
    resourceState = (await res.json()) as ResourceState;
    s.resource.send('stop');
    await waitExit(s.resource, 5_000);
    routeProblems = await routingProblems(s.fleet, nemesis.moves);
    problems.push(...s.fleet.crashed().map((c) => `${c.id} exited by itself (code ${c.code}, signal ${c.signal}): see ${dirs.log}`));
  } finally {
    for (const c of [...s.workers, s.resource]) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await s.fleet.stop();
  }
  const report = check(o, { workDir, dirs, nemesis: nemesis!, resourceState, problems, routeProblems });
  writeFileSync(path.join(workDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  if (report.ok && o.cleanOnSuccess) rmSync(dirs.data, { recursive: true, force: true });
  return report;
}

interface RunOutcome {
  readonly workDir: string;
  readonly dirs: { readonly history: string };
  readonly nemesis: MovesNemesis;
  readonly resourceState: ResourceState | undefined;
  readonly problems: readonly string[];
  readonly routeProblems: readonly string[];
}

function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function check(o: MovesChaosOptions, r: RunOutcome): MovesReport {
  const book = new CheckBook();
  const { violations, checkerMs } = book;
  const flag = book.flag.bind(book);
  const timed = <T>(name: string, fn: () => T): T => book.timed(name, fn);
  flag('processes', r.problems);
  flag('moves', [...r.nemesis.problems, ...r.routeProblems]);
  const history: History = timed('load history', () => loadHistory(r.dirs.history));
  const lh = timed('build lock histories', () => buildLockHistories(history));
  flag(
    'expiry',
    lh.earlyEnds.map(
      (w) =>
        `session ${w.s} ended (seen at ${w.end.toFixed(1)}) before its TTL of ${w.ttl} ms had passed since its last acknowledged heartbeat`,
    ),
  );
  flag(
    'odd failures',
    lh.oddFailures.slice(0, 20).map((op) => `${op.p}#${op.id} ${JSON.stringify(op.op)} failed with ${op.code}`),
    lh.oddFailures.length,
  );
  const results: LinearizabilityResult[] = timed('linearizability', () =>
    [...lh.byName.entries()].map(([name, events]) => checkLock(name, events, lh.expectations, LINEARIZABILITY_STATES_MAX)),
  );
  const checkerTimedOut = results.some((x) => x.timedOut);
  flag(
    'linearizability',
    results.filter((x) => !x.ok).map((x) => `${x.name}${x.timedOut ? ' (checker timeout)' : ''}: ${x.detail}`),
  );
  const tokens = timed('tokens', () => checkTokens(history, namespaceOf));
  flag('tokens', tokens.violations, tokens.violationCount);
  const resource = r.resourceState ? timed('resource', () => checkResource(history, r.resourceState!)) : undefined;
  if (resource) flag('resource', resource.violations, resource.violationCount);
  else flag('resource', ['the resource state could not be read']);
  const promises = timed('expiry promises', () => checkExpiryPromises(history, new Map(), leaderTimelineClock([])));
  flag('expiry', promises.violations, promises.violationCount);
  if (history.badLines > 0) flag('history', [`${history.badLines} history lines did not parse`]);

  const moves = r.nemesis.moves;
  const unavailable = moves.filter((m) => m.state === 'done' && m.unavailableMs !== undefined).map((m) => m.unavailableMs!);
  let expiriesSeen = 0;
  for (const w of lh.sessions.values()) if (w.end < Infinity && w.closeInvoked === Infinity) expiriesSeen++;
  const figures: MovesFigures = {
    seconds: o.seconds,
    cells: 2,
    replicasPerCell: MOVES_REPLICAS,
    controlPlanes: 3,
    lockServiceOps: history.ops.filter((op) => !op.op.f.startsWith('ctr-')).length,
    clientOps: history.ops.length,
    opsByKind: opsByKind(history.ops),
    fencedWrites: resource?.acceptedWrites ?? 0,
    movesDone: moves.filter((m) => m.state === 'done').length,
    movesFailed: moves.filter((m) => m.state === 'failed').length,
    unavailableMs: { median: median(unavailable), max: unavailable.length ? Math.max(...unavailable) : null },
    faultsStarted: r.nemesis.records.filter((f) => f.phase === 'start').length,
    faultsByKind: r.nemesis.started,
    expiriesSeenByClients: expiriesSeen,
    linearizability: {
      names: results.length,
      events: results.reduce((a, x) => a + x.events, 0),
      statesVisited: results.reduce((a, x) => a + x.statesVisited, 0),
    },
    checkerMs,
  };
  return {
    ok: book.violationCount === 0 && !checkerTimedOut,
    seed: o.seed,
    workDir: r.workDir,
    rerun: movesRerunCommand(o),
    figures,
    moves,
    faults: r.nemesis.records,
    violations,
    violationCount: book.violationCount,
    checkerTimedOut,
  };
}

export function summarizeMoves(r: MovesReport): string {
  const f = r.figures;
  const lines = [
    `chaos moves ${r.ok ? 'PASSED' : 'FAILED'}: seed ${r.seed}, ${f.seconds} s, ${f.cells} cells of ${f.replicasPerCell}, ${f.controlPlanes} control planes`,
    `  moves done ${f.movesDone}, failed and rolled back ${f.movesFailed}; unavailableMs median ${f.unavailableMs.median ?? '-'}, max ${f.unavailableMs.max ?? '-'}`,
    `  operations checked ${f.clientOps} (lock service ${f.lockServiceOps}); fenced writes ${f.fencedWrites}; expiries seen by clients ${f.expiriesSeenByClients}`,
    `  faults injected ${f.faultsStarted}: ${
      Object.entries(f.faultsByKind)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }`,
    `  checkers (ms): ${Object.entries(f.checkerMs)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}; linearizability ${f.linearizability.names} names, ${f.linearizability.events} events`,
  ];
  if (!r.ok) {
    lines.push(`  ${r.violationCount} violations${r.checkerTimedOut ? ' (a checker timed out)' : ''}:`);
    for (const [group, list] of Object.entries(r.violations)) for (const v of list.slice(0, 10)) lines.push(`    [${group}] ${v}`);
    lines.push(`  work dir: ${r.workDir}`, `  rerun: ${r.rerun}`);
  }
  return lines.join('\n');
}
