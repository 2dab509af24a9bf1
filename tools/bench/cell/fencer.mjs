// The Fencer side of the benchmark: a fresh five-replica cell (fsync on) in
// a temporary directory, and a raw gRPC client that behaves like the SDK
// (talks to the leader, follows leader hints, retries retryable errors with
// the same request).
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Metadata, credentials } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, internalpb, isRetryable, lockservice } from '@fencer/protocol';
import { planFleet, spawnReplica, waitForLeader, status as adminStatus, adminClient, CELL_NODE_MAIN } from '@fencer/fleet';
import { alive, freePortBase, killLeaderOf, nowMs, pool, sleep, stopChildren } from './common.mjs';

const GRANTED = 1;
const QUEUED = 2;
const ACQUIRED_EVENT = 2;
const NAMESPACE = 'bench';

export class FencerSystem {
  /** @param {{ replicas?: number, cpuProfDir?: string, cpuProfIntervalUs?: number, keepData?: boolean, extraArgs?: string[], main?: string, key?: string, label?: string, portBase?: number, env?: Record<string, string> }} opts */
  constructor(opts = {}) {
    this.key = opts.key ?? 'fencer';
    this.replicasN = opts.replicas ?? 5;
    this.label = opts.label ?? `Fencer, ${this.replicasN} replicas`;
    this.opts = opts;
    this.children = new Map();
    this.failures = 0;
    this.channels = new Map();
    this.requestSeq = 0;
  }

  get version() {
    if (this.opts.main)
      return `cell-node built from ${path.relative(process.cwd(), path.resolve(this.opts.main))}, Node ${process.version}`;
    try {
      return `cell-node ${JSON.parse(readFileSync(path.join(path.dirname(CELL_NODE_MAIN), '../package.json'), 'utf8')).version}, Node ${process.version}`;
    } catch {
      return `Node ${process.version}`;
    }
  }

  /** How this cell's replicas talk to each other (its extra flags may change the defaults). */
  get transportSetting() {
    const args = this.opts.extraArgs ?? [];
    const grpc = args.includes('grpc') && args.includes('--peer-transport');
    const eager = args.includes('--broadcast-commit');
    return `Raft messages ${grpc ? 'on gRPC streams' : 'in TCP frames'}, commit index sent ${eager ? 'at once in appends of its own' : 'with the next append or heartbeat'}`;
  }

  /** Where the replicas run their WAL fdatasync (--wal-sync-on-loop, or FENCER_WAL_SYNC_ON_LOOP). */
  get syncSetting() {
    const args = this.opts.extraArgs ?? [];
    const at = args.indexOf('--wal-sync-on-loop');
    const mode = at >= 0 ? args[at + 1] : (this.opts.env?.FENCER_WAL_SYNC_ON_LOOP ?? process.env.FENCER_WAL_SYNC_ON_LOOP ?? 'when-idle');
    return mode === 'never'
      ? 'on the thread pool'
      : 'on the event loop when idle 0.5 ms (a follower; the leader only while it serves one call, after polling for I/O), else on the thread pool';
  }

  get settings() {
    return `${this.replicasN} replicas, tick 100 ms, election 10 ticks (1–2 s randomised), heartbeat 1 tick, pre-vote and check-quorum on, ${this.transportSetting}, fdatasync (${this.syncSetting}) before any ready with entries, a vote or a term is acknowledged (a commit-only hard state rides with the next one), WAL in ${tmpdir()}; clients talk to the leader (following leader hints), watchers spread over all replicas`;
  }

  async start() {
    this.dataDir = mkdtempSync(path.join(tmpdir(), 'fencer-bench-cell-'));
    const portBase = await freePortBase(this.opts.portBase ?? (this.opts.main ? 12_000 : 11_000), 306);
    const [plan] = planFleet({
      replicas: this.replicasN,
      portBase,
      dataDir: this.dataDir,
      env: { FENCER_LOG_LEVEL: process.env.FENCER_LOG_LEVEL ?? 'warn', ...(this.opts.env ?? {}) },
      extraArgs: ['--ttl-max-ms', '3600000', ...(this.opts.extraArgs ?? [])],
    });
    this.replicas = plan.replicas;
    // Another build of the cell node (a baseline to compare against), from its own tree.
    if (this.opts.main) {
      const main = path.resolve(this.opts.main);
      // A build from before the TCP peer transport does not know --peer-listen.
      const knowsPeerListen = readFileSync(path.join(path.dirname(main), 'config.js'), 'utf8').includes('--peer-listen');
      for (const r of this.replicas) {
        r.argv[1] = main;
        const at = r.argv.indexOf('--peer-listen');
        if (!knowsPeerListen && at >= 0) r.argv.splice(at, 2);
      }
    }
    // NODE_FLAGS=--a,--b in this cell's env (from --compare-args): flags for node itself, which NODE_OPTIONS does not all accept.
    const nodeFlags = (this.opts.env?.NODE_FLAGS ?? '').split(',').filter(Boolean);
    if (nodeFlags.length > 0) for (const r of this.replicas) r.argv.splice(1, 0, ...nodeFlags);
    if (this.opts.cpuProfDir) {
      for (const r of this.replicas)
        r.argv.splice(
          1,
          0,
          '--cpu-prof',
          '--cpu-prof-interval',
          String(this.opts.cpuProfIntervalUs ?? 250),
          '--cpu-prof-dir',
          path.join(this.opts.cpuProfDir, r.id),
        );
    }
    this.endpoints = this.replicas.map((r) => r.grpc);
    for (const r of this.replicas) this.spawn(r);
    const st = await waitForLeader(this.replicas, 30_000);
    this.target = this.replicas.find((r) => r.id === st.leaderId).grpc;
  }

  spawn(r) {
    this.children.set(r.id, spawnReplica(r, { logDir: path.join(this.dataDir, 'logs') }));
  }

  pids() {
    return [...this.children.values()].filter(alive).map((c) => c.pid);
  }

  async leader() {
    const st = await waitForLeader(
      this.replicas.filter((r) => alive(this.children.get(r.id))),
      30_000,
    );
    return { id: st.leaderId, pid: this.children.get(st.leaderId).pid };
  }

  /** kill -9 of the current leader; returns the time of the kill. */
  killLeader() {
    return killLeaderOf(this);
  }

  /** Restarts the replica killed last and waits until it has caught up with the leader's commit index. */
  async restartKilled() {
    if (!this.killed) return;
    const r = this.replicas.find((x) => x.id === this.killed);
    this.spawn(r);
    this.killed = undefined;
    const admin = adminClient(r.admin);
    try {
      const until = Date.now() + 30_000;
      while (Date.now() < until) {
        const lead = await this.leader();
        const leadStatus = await adminStatus(adminClient(this.replicas.find((x) => x.id === lead.id).admin), 1000);
        const mine = await adminStatus(admin, 1000);
        if (mine && leadStatus && mine.leaderId === lead.id && mine.commitIndex >= leadStatus.commitIndex - 10) return;
        await sleep(200);
      }
    } finally {
      admin.close();
    }
  }

  async stop() {
    for (const c of this.channels.values()) c.close();
    this.channels.clear();
    for (const c of this.internalChannels?.values() ?? []) c.close();
    await stopChildren([...this.children.values()], 8000);
    if (!this.opts.keepData && this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  // ---- client ----

  raw(address) {
    let c = this.channels.get(address);
    if (!c) {
      c = new lockservice.LockServiceClient(address, credentials.createInsecure());
      this.channels.set(address, c);
    }
    return c;
  }

  once(address, method, req, timeoutMs) {
    const c = this.raw(address);
    return new Promise((resolve, reject) =>
      c[method](req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      ),
    );
  }

  /**
   * One unary call as the SDK makes it: to the leader it believes in, following
   * leader-hint, retrying retryable errors with the same request (counted as
   * failed calls). Resolves with the response and the start time of the attempt that succeeded.
   */
  async call(method, req, { budgetMs = 30_000, timeoutMs = 10_000 } = {}) {
    const until = nowMs() + budgetMs;
    let attempt = 0;
    for (;;) {
      const target = this.target;
      const startedMs = nowMs();
      try {
        const res = await this.once(target, method, req, timeoutMs);
        return { res, startedMs };
      } catch (e) {
        const fe = e instanceof FencerError ? e : new FencerError('INTERNAL', String(e));
        this.failures++;
        if (!isRetryable(fe.code) || nowMs() > until) throw fe;
        attempt++;
        if (this.target === target) {
          this.target =
            fe.leaderHint && fe.leaderHint !== target && this.endpoints.includes(fe.leaderHint)
              ? fe.leaderHint
              : this.endpoints[(this.endpoints.indexOf(target) + 1) % this.endpoints.length];
        }
        await sleep(Math.min(100, 10 * attempt));
      }
    }
  }

  async openSession(ttlS) {
    const { res } = await this.call('openSession', { clientId: 'bench', ttlMs: ttlS * 1000, namespace: NAMESPACE });
    return new FencerSession(this, res.sessionId);
  }

  lockName(parts) {
    return `/ls/${NAMESPACE}/${parts}`;
  }

  // ---- keepalive and watch (protocol-specific parts of two scenarios) ----

  /** Opens n sessions with a long TTL; returns their ids. */
  async openManySessions(n, ttlS) {
    return pool(
      n,
      128,
      async () => (await this.call('openSession', { clientId: 'bench-ka', ttlMs: ttlS * 1000, namespace: NAMESPACE })).res.sessionId,
    );
  }

  /** A KeepAlive stream to the leader: send(id) writes one heartbeat; onAck(id) is called per answer. */
  keepAliveStream(onAck, onError) {
    const s = this.raw(this.target).keepAlive();
    s.on('data', (r) => onAck(r.sessionId));
    s.on('error', (e) => onError(e));
    return { send: (id) => s.write({ sessionId: id }), close: () => s.end() };
  }

  /**
   * One HeartbeatBatch to the leader, as a session proxy sends it (the
   * architecture's path for heartbeats at scale: the proxy terminates the
   * clients' KeepAlive streams and sends one batch per interval). Resolves
   * with the number of sessions answered.
   */
  heartbeatBatch(ids) {
    const address = this.target;
    let c = this.internalChannels?.get(address);
    if (!c) {
      this.internalChannels ??= new Map();
      c = new internalpb.CellInternalClient(address, credentials.createInsecure());
      this.internalChannels.set(address, c);
    }
    return new Promise((resolve, reject) =>
      c.heartbeatBatch({ sessionIds: ids, proxyId: 'bench-proxy' }, new Metadata(), { deadline: Date.now() + 10_000 }, (err, res) =>
        err ? reject(err) : resolve(res.sessions.length),
      ),
    );
  }

  /** A prefix watch on replica i % replicas: onEvent(name) per ACQUIRED event; resolves once the stream is live. */
  watch(i, prefix, onAcquired) {
    const address = this.endpoints[i % this.endpoints.length];
    const s = this.raw(address).watch({ name: prefix, prefix: true, sinceRevision: 0 });
    let live = false;
    return new Promise((resolve, reject) => {
      s.on('data', (e) => {
        if (e.type === ACQUIRED_EVENT) onAcquired(e.name);
        if (!live) {
          live = true;
          resolve({ close: () => s.cancel() });
        }
      });
      s.on('error', (e) => {
        if (!live) reject(e);
      });
    });
  }
}

class FencerSession {
  constructor(system, sessionId) {
    this.system = system;
    this.sessionId = sessionId;
  }

  requestId() {
    return `b${++this.system.requestSeq}`;
  }

  /** Blocking acquire (wait up to 60 s); resolves with a handle and the start of the attempt that succeeded. */
  async lock(name) {
    const req = { sessionId: this.sessionId, name, mode: 1, waitMs: 60_000, requestId: this.requestId(), lockDelayMs: 0 };
    for (;;) {
      const { res, startedMs } = await this.system.call('acquire', req, { timeoutMs: 75_000 });
      if (res.status === GRANTED) return { name, token: res.token, startedMs };
      if (res.status !== QUEUED) throw new Error(`acquire of ${name} ended ${res.status}`);
      // QUEUED: the held-open call ended early; the same request id resumes the wait.
    }
  }

  /** Try-lock: a handle when granted, null when someone else holds it. */
  async tryLock(name) {
    const { res } = await this.system.call('acquire', {
      sessionId: this.sessionId,
      name,
      mode: 1,
      waitMs: 0,
      requestId: this.requestId(),
      lockDelayMs: 0,
    });
    return res.status === GRANTED ? { name, token: res.token } : null;
  }

  async unlock(handle) {
    const { res } = await this.system.call('release', { sessionId: this.sessionId, name: handle.name, token: handle.token });
    if (!res.ok) throw new Error(`release of ${handle.name} token ${handle.token} was not current`);
  }

  /** Linearizable read of a lock's current token (CheckToken). */
  async read(handle) {
    const { res } = await this.system.call('checkToken', { name: handle.name, token: handle.token });
    if (!res.current) throw new Error(`token ${handle.token} of ${handle.name} is not current`);
  }

  async close() {
    await this.system.call('closeSession', { sessionId: this.sessionId }).catch(() => {});
  }
}
