// Fencer as one cell, clients straight to it: a fresh cell of five replicas
// (fsync on) from this build or another (--baseline), in a temporary
// directory on 127.0.0.1. Clients talk to the leader, following leader
// hints, as the SDK does; watchers spread over every replica.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { planFleet, spawnReplica, waitForLeader, status as adminStatus, adminClient } from '@fencer/fleet';
import { FencerClientSystem } from './fencer-client.mjs';
import { appVersion, requireBuilt, thisBuild, useBuild } from './builds.mjs';
import { alive, freePortBase, killLeaderOf, stopChildren } from '../processes.mjs';
import { sleep } from '../measure.mjs';

/** Ports of a cell: gRPC, admin (+100), metrics (+200), peers (+300) per replica. */
const CELL_PORT_SPAN = 306;
/** A leader is awaited this long after start and after a kill. */
const LEADER_WAIT_MS = 30_000;
/** A restarted replica has caught up when within this many entries of the leader's commit index. */
const CAUGHT_UP_ENTRIES = 10;
const STOP_GRACE_MS = 8_000;
const ADMIN_TIMEOUT_MS = 1_000;

/** Where the replicas run their WAL fdatasync (--wal-sync-on-loop, or FENCER_WAL_SYNC_ON_LOOP). */
function syncSetting(args, env) {
  const at = args.indexOf('--wal-sync-on-loop');
  const mode = at >= 0 ? args[at + 1] : (env.FENCER_WAL_SYNC_ON_LOOP ?? process.env.FENCER_WAL_SYNC_ON_LOOP ?? 'when-idle');
  return mode === 'never'
    ? 'on the thread pool'
    : 'on the event loop when idle 0.5 ms (a follower; the leader only while it serves one call, after polling for I/O), else on the thread pool';
}

/** How the replicas talk to each other (the compared cell's flags may change the defaults). */
function transportSetting(args) {
  const grpc = args.includes('grpc') && args.includes('--peer-transport');
  const eager = args.includes('--broadcast-commit');
  return `Raft messages ${grpc ? 'on gRPC streams' : 'in TCP frames'}, commit index sent ${eager ? 'at once in appends of its own' : 'with the next append or heartbeat'}`;
}

/**
 * Node flags for the replicas: NODE_FLAGS=--a,--b in the cell's env (from
 * --compare-args; NODE_OPTIONS refuses some V8 flags), and --cpu-prof.
 */
function nodeFlags(opts, id) {
  const flags = (opts.env?.NODE_FLAGS ?? '').split(',').filter(Boolean);
  if (opts.cpuProfDir) flags.push('--cpu-prof', '--cpu-prof-interval', '250', '--cpu-prof-dir', path.join(opts.cpuProfDir, id));
  return flags;
}

export class FencerCell extends FencerClientSystem {
  /** @param {{ build?: object, key?: string, label?: string, replicas?: number, extraArgs?: string[], env?: Record<string,string>, cpuProfDir?: string, keepData?: boolean, portBase?: number }} opts */
  constructor(opts = {}) {
    super();
    this.opts = opts;
    this.build = opts.build ?? thisBuild();
    this.replicasN = opts.replicas ?? 5;
    this.key = opts.key ?? 'fencer';
    this.label = opts.label ?? `Fencer, ${this.replicasN} replicas`;
    this.children = new Map();
  }

  get version() {
    return `cell-node ${appVersion(this.build, 'cell-node')} from ${this.build.label === 'this build' ? 'this tree' : this.build.root}, Node ${process.version}`;
  }

  get settings() {
    const args = this.opts.extraArgs ?? [];
    return `${this.replicasN} replicas, tick 100 ms, election 10 ticks (1–2 s randomised), heartbeat 1 tick, pre-vote and check-quorum on, ${transportSetting(args)}, fdatasync (${syncSetting(args, this.opts.env ?? {})}) before any ready with entries, a vote or a term is acknowledged (a commit-only hard state rides with the next one), WAL in ${tmpdir()}; clients talk to the leader (following leader hints), watchers spread over all replicas`;
  }

  async start() {
    requireBuilt(this.build, ['cell-node']);
    this.dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-bench-cell-'));
    const portBase = await freePortBase(this.opts.portBase ?? 11_000, CELL_PORT_SPAN);
    const [plan] = planFleet({
      replicas: this.replicasN,
      portBase,
      dataDir: this.dataDir,
      env: { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn', ...(this.opts.env ?? {}) },
      extraArgs: ['--ttl-max-ms', '3600000', ...(this.opts.extraArgs ?? [])],
    });
    this.replicas = plan.replicas.map((r) => useBuild(r, this.build, 'cell-node'));
    for (const r of this.replicas) r.argv.splice(1, 0, ...nodeFlags(this.opts, r.id));
    this.endpoints = this.replicas.map((r) => r.grpc);
    for (const r of this.replicas) this.spawn(r);
    const st = await waitForLeader(this.replicas, LEADER_WAIT_MS);
    this.target = this.replicas.find((r) => r.id === st.leaderId).grpc;
  }

  spawn(r) {
    this.children.set(r.id, spawnReplica(r, { logDir: path.join(this.dataDir, 'logs') }));
  }

  pids() {
    return [...this.children.values()].filter(alive).map((c) => c.pid);
  }

  watchEndpoints() {
    return this.endpoints;
  }

  /** Where KeepAlive streams go: the leader, or (spread) every replica, whose followers relay to it. */
  keepAliveTargets(spread) {
    return spread ? this.endpoints : [this.target];
  }

  async leader() {
    const live = this.replicas.filter((r) => alive(this.children.get(r.id)));
    const st = await waitForLeader(live, LEADER_WAIT_MS);
    this.leaderKnown = { id: st.leaderId, pid: this.children.get(st.leaderId).pid };
    return this.leaderKnown;
  }

  leaderPid() {
    return this.leaderKnown?.pid;
  }

  /** kill -9 of the current leader; resolves with the time of the kill. */
  killLeader() {
    return killLeaderOf(this);
  }

  /** Restarts the replica killed last and waits until it has caught up with the leader's commit index. */
  async restartKilled() {
    if (!this.killed) return;
    const r = this.replicas.find((x) => x.id === this.killed);
    this.spawn(r);
    this.killed = undefined;
    await waitCaughtUp(this, r);
  }

  async stop() {
    this.closeChannels();
    await stopChildren([...this.children.values()], STOP_GRACE_MS);
    if (!this.opts.keepData && this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** Waits (bounded) until replica `r` follows the leader within CAUGHT_UP_ENTRIES of its commit index. */
export async function waitCaughtUp(system, r) {
  const admin = adminClient(r.admin);
  try {
    for (const until = Date.now() + LEADER_WAIT_MS; Date.now() < until; await sleep(200)) {
      const lead = await system.leader();
      const leaderAdmin = adminClient(system.replicas.find((x) => x.id === lead.id).admin);
      const leadStatus = await adminStatus(leaderAdmin, ADMIN_TIMEOUT_MS);
      leaderAdmin.close();
      const mine = await adminStatus(admin, ADMIN_TIMEOUT_MS);
      if (mine && leadStatus && mine.leaderId === lead.id && mine.commitIndex >= leadStatus.commitIndex - CAUGHT_UP_ENTRIES) return;
    }
  } finally {
    admin.close();
  }
}
