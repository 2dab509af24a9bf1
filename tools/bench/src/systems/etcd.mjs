// etcd as a benchmark system: a fresh N-member etcd (Debian etcd-server,
// default heartbeat 100 ms and election 1000 ms, fsync on) on loopback, and
// a raw gRPC client over the same grpc-js the Fencer client uses, calling
// the leader. A session is a lease; a lock is the v3lock service's
// Lock(name, lease) / Unlock(key), the server-side mutex etcd ships;
// try-lock is clientv3's Mutex.TryLock (one Txn, and a delete when someone
// else holds the lock); keepalives are LeaseKeepAlive messages.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, openSync, rmSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, loadPackageDefinition, Metadata } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { readVarint, skipField, varint } from '../grpc-frames.mjs';
import { nowMs, pool, sleep } from '../measure.mjs';
import { alive, freePortBase, killLeaderOf, stopChildren, waitForPort } from '../processes.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const ETCD_BIN = process.env.ETCD_BIN ?? '/usr/bin/etcd';

const def = loadSync(['etcd-subset.proto', 'v3lock-subset.proto'], {
  includeDirs: [here],
  keepCase: true,
  longs: String,
  enums: Number,
  defaults: true,
  oneofs: true,
});
const pkg = loadPackageDefinition(def);
const { KV, Lease, Watch, Maintenance } = pkg.etcdserverpb;
const { Lock } = pkg.v3lockpb;

const CREATE = 1;
const EQUAL = 0;
const ASCEND = 1;

/** The key just past every key with this prefix. */
function prefixEnd(prefix) {
  const b = Buffer.from(prefix);
  for (let i = b.length - 1; i >= 0; i--) {
    if (b[i] < 0xff) {
      const e = Buffer.from(b.subarray(0, i + 1));
      e[i]++;
      return e;
    }
  }
  return Buffer.from([0]);
}

export function etcdVersion() {
  try {
    return execFileSync(ETCD_BIN, ['--version'], { encoding: 'utf8' }).split('\n')[0].replace('etcd Version: ', 'etcd ');
  } catch {
    return 'etcd (not found)';
  }
}

export class EtcdSystem {
  constructor(members, opts = {}) {
    this.members = members;
    this.key = `etcd${members}`;
    this.label = `etcd, ${members} members`;
    this.opts = opts;
    this.children = new Map();
    this.failures = 0;
    this.clients = new Map();
  }

  get version() {
    return etcdVersion();
  }

  get settings() {
    return `${this.members} members, default --heartbeat-interval 100 ms and --election-timeout 1000 ms, fsync on (the default), data in ${tmpdir()}; clients talk to the leader, watchers spread over all members`;
  }

  /** etcd has no batched keepalive: one LeaseKeepAlive message per lease is its only form (the keepalive row). */
  supports(key) {
    return key !== 'keepalive-batched-10000';
  }

  supportNote() {
    return 'no batched form: one LeaseKeepAlive message per lease (the row above)';
  }

  async start() {
    this.dataDir = mkdtempSync(path.join(tmpdir(), `fencer-bench-${this.key}-`));
    const base = await freePortBase(this.members === 5 ? 14_000 : 15_000, 120);
    this.nodes = [];
    for (let i = 1; i <= this.members; i++) {
      this.nodes.push({ name: `e${i}`, client: base + i, peer: base + 100 + i, dir: path.join(this.dataDir, `e${i}`) });
    }
    const cluster = this.nodes.map((n) => `${n.name}=http://127.0.0.1:${n.peer}`).join(',');
    this.endpoints = this.nodes.map((n) => `127.0.0.1:${n.client}`);
    for (const n of this.nodes) {
      n.argv = [
        '--name',
        n.name,
        '--data-dir',
        n.dir,
        '--listen-client-urls',
        `http://127.0.0.1:${n.client}`,
        '--advertise-client-urls',
        `http://127.0.0.1:${n.client}`,
        '--listen-peer-urls',
        `http://127.0.0.1:${n.peer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${n.peer}`,
        '--initial-cluster',
        cluster,
        '--initial-cluster-state',
        'new',
        '--initial-cluster-token',
        `bench-${process.pid}-${this.key}`,
        '--logger',
        'zap',
        '--log-level',
        'warn',
      ];
      this.spawn(n);
    }
    for (const n of this.nodes) await waitForPort(n.client, 30_000);
    await this.leader();
    this.target = this.leaderEndpoint;
  }

  spawn(n) {
    mkdirSync(n.dir, { recursive: true });
    const log = openSync(path.join(this.dataDir, `${n.name}.log`), 'a');
    const child = spawn(ETCD_BIN, n.argv, { stdio: ['ignore', log, log] });
    closeSync(log);
    this.children.set(n.name, child);
  }

  pids() {
    return [...this.children.values()].filter(alive).map((c) => c.pid);
  }

  client(kind, address) {
    const k = `${kind}@${address}`;
    let c = this.clients.get(k);
    if (!c) {
      const Ctor = { KV, Lease, Watch, Maintenance, Lock }[kind];
      c = new Ctor(address, credentials.createInsecure());
      this.clients.set(k, c);
    }
    return c;
  }

  unaryOnce(kind, method, req, address, timeoutMs) {
    const c = this.client(kind, address);
    return new Promise((resolve, reject) =>
      c[method](req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res))),
    );
  }

  /** Retries any error on the next endpoint (the calls made here are idempotent); counts failed attempts. */
  async call(kind, method, req, { budgetMs = 30_000, timeoutMs = 10_000 } = {}) {
    const until = nowMs() + budgetMs;
    let attempt = 0;
    for (;;) {
      const target = this.target;
      const startedMs = nowMs();
      try {
        return { res: await this.unaryOnce(kind, method, req, target, timeoutMs), startedMs };
      } catch (e) {
        this.failures++;
        if (nowMs() > until) throw e;
        attempt++;
        if (this.target === target) this.target = this.endpoints[(this.endpoints.indexOf(target) + 1) % this.endpoints.length];
        await sleep(Math.min(100, 10 * attempt));
      }
    }
  }

  /** Finds the leader through Maintenance.Status (waits until one is known and every live member agrees). */
  async leader() {
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      const live = this.nodes.filter((n) => alive(this.children.get(n.name)));
      const st = await Promise.all(
        live.map((n) => this.unaryOnce('Maintenance', 'status', {}, `127.0.0.1:${n.client}`, 1000).catch(() => undefined)),
      );
      const leaders = new Set(st.filter(Boolean).map((s) => s.leader));
      const lead = st.find((s) => s && s.leader !== '0' && s.header.member_id === s.leader);
      if (lead && leaders.size === 1 && st.filter(Boolean).length > this.members / 2) {
        const n = live[st.indexOf(lead)];
        this.leaderEndpoint = `127.0.0.1:${n.client}`;
        this.leaderKnown = { id: n.name, pid: this.children.get(n.name).pid };
        return this.leaderKnown;
      }
      await sleep(100);
    }
    throw new Error(`${this.label}: no leader within 30 s`);
  }

  /** kill -9 of the current leader; returns the time of the kill. */
  killLeader() {
    return killLeaderOf(this);
  }

  async restartKilled() {
    if (!this.killed) return;
    const n = this.nodes.find((x) => x.name === this.killed);
    // A restarted member rejoins from its data dir: drop the bootstrap-only flags' meaning by using state "existing".
    n.argv[n.argv.indexOf('--initial-cluster-state') + 1] = 'existing';
    this.spawn(n);
    this.killed = undefined;
    await waitForPort(n.client, 30_000);
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      await this.leader();
      const lead = await this.unaryOnce('Maintenance', 'status', {}, this.leaderEndpoint, 1000).catch(() => undefined);
      const mine = await this.unaryOnce('Maintenance', 'status', {}, `127.0.0.1:${n.client}`, 1000).catch(() => undefined);
      if (lead && mine && Number(mine.raftAppliedIndex) >= Number(lead.raftIndex) - 10) return;
      await sleep(200);
    }
  }

  async stop() {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    await stopChildren([...this.children.values()], 8000);
    if (!this.opts.keepData && this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  async openSession(ttlS) {
    const { res } = await this.call('Lease', 'leaseGrant', { TTL: String(ttlS), ID: '0' });
    return new EtcdSession(this, res.ID);
  }

  lockName(parts) {
    return `/bench/${parts}`;
  }

  async openManySessions(n, ttlS) {
    return pool(n, 128, async () => (await this.call('Lease', 'leaseGrant', { TTL: String(ttlS), ID: '0' })).res.ID);
  }

  /** LeaseKeepAliveRequest { int64 ID = 1 } out; LeaseKeepAliveResponse { header = 1; int64 ID = 2; int64 TTL = 3 } back (TTL 0: the lease is gone). */
  keepAliveWire() {
    return {
      path: '/etcdserverpb.Lease/LeaseKeepAlive',
      encode: (id) => Buffer.concat([Buffer.from([0x08]), varint(id)]),
      // Answers are matched by the ID's varint bytes.
      keyOf: (id) => varint(id).toString('latin1'),
      decode: (b, at, end) => {
        let key;
        let ttl = 0;
        while (at < end) {
          const tag = b[at++];
          if (tag === 0x10) {
            const next = readVarint(b, at)[1];
            key = b.toString('latin1', at, next);
            at = next;
          } else if (tag === 0x18) [ttl, at] = readVarint(b, at);
          else at = skipField(b, tag, at);
        }
        return { key, expired: ttl === 0 };
      },
    };
  }

  /** Where LeaseKeepAlive streams go: the leader, or (spread) every member, whose followers forward to it. */
  keepAliveTargets(spread) {
    return spread ? this.endpoints : [this.leaderEndpoint];
  }

  leaderPid() {
    return this.leaderKnown?.pid;
  }

  watch(i, prefix, onPut) {
    const address = this.endpoints[i % this.endpoints.length];
    const s = this.client('Watch', address).watch();
    return new Promise((resolve, reject) => {
      let live = false;
      s.on('data', (r) => {
        if (r.created && !live) {
          live = true;
          resolve({ close: () => s.cancel() });
        }
        for (const e of r.events) if (e.type === 0) onPut(e.kv.key.toString());
      });
      s.on('error', (e) => {
        if (!live) reject(e);
      });
      s.write({ create_request: { key: Buffer.from(prefix), range_end: prefixEnd(prefix) } });
    });
  }
}

class EtcdSession {
  constructor(system, leaseId) {
    this.system = system;
    this.lease = leaseId;
    this.leaseHex = BigInt(leaseId).toString(16);
  }

  async lock(name) {
    const { res, startedMs } = await this.system.call(
      'Lock',
      'lock',
      { name: Buffer.from(name), lease: this.lease },
      { timeoutMs: 75_000 },
    );
    return { name, key: res.key, startedMs };
  }

  /** clientv3 Mutex.TryLock: put our key if absent and read the owner in one Txn; not the owner → delete our key. */
  async tryLock(name) {
    const pfx = `${name}/`;
    const myKey = Buffer.from(`${pfx}${this.leaseHex}`);
    const owner = {
      request_range: { key: Buffer.from(pfx), range_end: prefixEnd(pfx), sort_target: CREATE, sort_order: ASCEND, limit: '1' },
    };
    const { res } = await this.system.call('KV', 'txn', {
      compare: [{ result: EQUAL, target: CREATE, key: myKey, create_revision: '0' }],
      success: [{ request_put: { key: myKey, value: Buffer.alloc(0), lease: this.lease } }, owner],
      failure: [{ request_range: { key: myKey } }, owner],
    });
    const myRev = res.succeeded ? res.header.revision : res.responses[0].response_range.kvs[0]?.create_revision;
    const ownerKv = res.responses[1].response_range.kvs[0];
    if (ownerKv && ownerKv.create_revision === myRev) return { name, key: myKey };
    await this.system.call('KV', 'deleteRange', { key: myKey });
    return null;
  }

  async unlock(handle) {
    await this.system.call('Lock', 'unlock', { key: handle.key });
  }

  /** Linearizable read (serializable = false) of the lock's key. */
  async read(handle) {
    const { res } = await this.system.call('KV', 'range', { key: handle.key, serializable: false });
    if (res.kvs.length !== 1) throw new Error(`lock key ${handle.key} is gone`);
  }

  async close() {
    await this.system.call('Lease', 'leaseRevoke', { ID: this.lease }).catch(() => {});
  }
}
