// ZooKeeper as a benchmark system: a fresh three-server ensemble (Debian
// zookeeper 3.8, started with java directly, one generated zoo.cfg per
// server, forceSync on: the default) on loopback, and node-zookeeper-client.
// A session is one ZooKeeper session (one connection, to any server: the
// client picks); a lock is the ephemeral-sequential recipe with protected
// names (create <parent>/lock-<uuid>-N, getChildren, the lowest holds it,
// the others watch their predecessor; release = delete), so a create retried
// after a lost connection finds its own node instead of queueing twice.
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, mkdirSync, openSync, closeSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import zookeeper from 'node-zookeeper-client';
import { nowMs, pool, sleep } from '../measure.mjs';
import { alive, freePortBase, killLeaderOf, stopChildren, waitForPort } from '../processes.mjs';

const JAVA = process.env.JAVA_BIN ?? '/usr/bin/java';
const ZK_JAR = '/usr/share/java/zookeeper.jar';
const CLASSPATH = [ZK_JAR, '/usr/share/java/slf4j-nop.jar'].join(':');
const { CreateMode, Exception } = zookeeper;

/** Sends a four-letter command and returns the answer. */
function fourLetter(port, cmd, timeoutMs = 1000) {
  return new Promise((resolve) => {
    let out = '';
    const s = net.connect({ host: '127.0.0.1', port }, () => s.write(cmd));
    const timer = setTimeout(() => {
      s.destroy();
      resolve('');
    }, timeoutMs);
    s.on('data', (d) => (out += d));
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    s.on('error', () => {});
  });
}

export function zkVersion() {
  try {
    const out = execFileSync(JAVA, ['-cp', CLASSPATH, 'org.apache.zookeeper.version.VersionInfoMain'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return `ZooKeeper ${/version\s+([\d.]+)/.exec(out)?.[1] ?? out.trim()}`;
  } catch {
    return existsSync(ZK_JAR) ? 'ZooKeeper (version unknown)' : 'ZooKeeper (not found)';
  }
}

/** Promise of a node-zookeeper-client call's first result. */
const p = (fn) => new Promise((resolve, reject) => fn((err, result) => (err ? reject(err) : resolve(result))));

export class ZkSystem {
  constructor(servers, opts = {}) {
    this.servers = servers;
    this.key = `zk${servers}`;
    this.label = `ZooKeeper, ${servers} servers`;
    this.opts = opts;
    this.children = new Map();
    this.failures = 0;
    this.madeParents = new Set();
    this.conns = new Set();
  }

  get version() {
    const java = spawnSync(JAVA, ['-version'], { encoding: 'utf8' });
    return `${zkVersion()}, ${(java.stderr ?? '').split('\n')[0].replace(/"/g, '') || 'java'}`;
  }

  get settings() {
    return `${this.servers} servers, tickTime 2000 ms, initLimit 10, syncLimit 5, forceSync on (the default), maxClientCnxns 0, data in ${tmpdir()}; each session connects to a server of the client's choosing`;
  }

  /** Scenarios the ZooKeeper model has no counterpart for. */
  supports(key) {
    return !key.startsWith('keepalive');
  }

  supportNote(key) {
    return key.startsWith('keepalive')
      ? 'no per-session keepalive call: sessions are kept by pings on their own connection'
      : 'not applicable';
  }

  async start() {
    this.dataDir = mkdtempSync(path.join(tmpdir(), `fencer-bench-${this.key}-`));
    const base = await freePortBase(16_000, 330);
    this.nodes = [];
    for (let i = 1; i <= this.servers; i++)
      this.nodes.push({
        id: i,
        client: base + i,
        quorum: base + 100 + i,
        election: base + 200 + i,
        dir: path.join(this.dataDir, `zk${i}`),
      });
    const ensemble = this.nodes.map((n) => `server.${n.id}=127.0.0.1:${n.quorum}:${n.election}`).join('\n');
    for (const n of this.nodes) {
      mkdirSync(n.dir, { recursive: true });
      writeFileSync(path.join(n.dir, 'myid'), `${n.id}\n`);
      n.cfg = path.join(n.dir, 'zoo.cfg');
      writeFileSync(
        n.cfg,
        [
          'tickTime=2000',
          'initLimit=10',
          'syncLimit=5',
          `dataDir=${n.dir}`,
          `clientPort=${n.client}`,
          'clientPortAddress=127.0.0.1',
          'maxClientCnxns=0',
          'admin.enableServer=false',
          '4lw.commands.whitelist=srvr,ruok',
          'forceSync=yes',
          ensemble,
          '',
        ].join('\n'),
      );
      this.spawn(n);
    }
    for (const n of this.nodes) await waitForPort(n.client, 60_000);
    await this.leader();
    this.connect = this.nodes.map((n) => `127.0.0.1:${n.client}`).join(',');
    const admin = await this.newConn();
    await p((cb) => admin.mkdirp('/bench', cb));
    admin.close();
    this.conns.delete(admin);
  }

  spawn(n) {
    const log = openSync(path.join(this.dataDir, `zk${n.id}.log`), 'a');
    const child = spawn(
      JAVA,
      [
        '-Xms64m',
        '-Xmx512m',
        '-Dzookeeper.admin.enableServer=false',
        '-cp',
        CLASSPATH,
        'org.apache.zookeeper.server.quorum.QuorumPeerMain',
        n.cfg,
      ],
      {
        stdio: ['ignore', log, log],
      },
    );
    closeSync(log);
    this.children.set(n.id, child);
  }

  pids() {
    return [...this.children.values()].filter(alive).map((c) => c.pid);
  }

  async leader() {
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const live = this.nodes.filter((n) => alive(this.children.get(n.id)));
      const modes = await Promise.all(live.map((n) => fourLetter(n.client, 'srvr')));
      const at = modes.findIndex((m) => /Mode: leader/.test(m));
      const serving = modes.filter((m) => /Mode: (leader|follower)/.test(m)).length;
      if (at >= 0 && serving > this.servers / 2) {
        this.leaderKnown = { id: live[at].id, pid: this.children.get(live[at].id).pid };
        return this.leaderKnown;
      }
      await sleep(100);
    }
    throw new Error(`${this.label}: no leader within 60 s`);
  }

  leaderPid() {
    return this.leaderKnown?.pid;
  }

  /** kill -9 of the current leader; returns the time of the kill. */
  killLeader() {
    return killLeaderOf(this);
  }

  async restartKilled() {
    if (!this.killed) return;
    const n = this.nodes.find((x) => x.id === this.killed);
    this.spawn(n);
    this.killed = undefined;
    await waitForPort(n.client, 60_000);
    const until = Date.now() + 60_000;
    while (Date.now() < until && !/Mode: (leader|follower)/.test(await fourLetter(n.client, 'srvr'))) await sleep(200);
  }

  async stop() {
    for (const c of this.conns) c.close();
    this.conns.clear();
    await stopChildren([...this.children.values()], 8000);
    if (!this.opts.keepData && this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Packets the servers have received from clients so far (the sum of `srvr`'s Received counters). */
  async packetsReceived() {
    const answers = await Promise.all(this.nodes.map((n) => fourLetter(n.client, 'srvr')));
    return answers.reduce((sum, a) => sum + Number(/Received: (\d+)/.exec(a)?.[1] ?? NaN), 0);
  }

  /** A connected client (one session); `sessionTimeoutMs` sets the session's timeout, so its pings' pace (a third of it). */
  newConn({ sessionTimeoutMs = 30_000 } = {}) {
    const c = zookeeper.createClient(this.connect ?? this.nodes.map((n) => `127.0.0.1:${n.client}`).join(','), {
      sessionTimeout: sessionTimeoutMs,
      spinDelay: 50,
      retries: 0,
    });
    this.conns.add(c);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('ZooKeeper connect timed out')), 30_000);
      c.once('connected', () => {
        clearTimeout(timer);
        resolve(c);
      });
      c.connect();
    });
  }

  /** Runs a ZooKeeper call, retrying connection loss (counted as failed calls). */
  async retry(fn, budgetMs = 30_000) {
    const until = nowMs() + budgetMs;
    for (;;) {
      const startedMs = nowMs();
      try {
        return { res: await fn(), startedMs };
      } catch (e) {
        this.failures++;
        const code = e?.getCode?.();
        const transient = code === Exception.CONNECTION_LOSS || code === Exception.OPERATION_TIMEOUT || code === Exception.SESSION_MOVED;
        if (!transient || nowMs() > until) throw e;
        await sleep(20);
      }
    }
  }

  async ensureParent(conn, parent) {
    if (this.madeParents.has(parent)) return;
    await this.retry(() => p((cb) => conn.mkdirp(parent, cb)));
    this.madeParents.add(parent);
  }

  async openSession() {
    return new ZkSession(this, await this.newConn());
  }

  lockName(parts) {
    return `/bench/${parts}`;
  }

  /** A children watch on the prefix node (one-shot, re-armed after each event); onEvent(null) per change. */
  async watch(i, prefix, onEvent) {
    // 100 sessions carry the watchers (10 per session: node-zookeeper-client warns past 10 watchers of one path per session).
    this.watchConns ??= pool(100, 10, () => this.newConn());
    const conns = await this.watchConns;
    const conn = conns[i % conns.length];
    const node = prefix.replace(/\/$/, '');
    await this.ensureParent(conn, node);
    let closed = false;
    const arm = () =>
      new Promise((resolve) =>
        conn.getChildren(
          node,
          () => {
            if (closed) return;
            onEvent(null);
            arm();
          },
          () => resolve(),
        ),
      );
    await arm();
    return { close: () => (closed = true) };
  }
}

class ZkSession {
  constructor(system, conn) {
    this.system = system;
    this.conn = conn;
    this.guid = randomUUID().slice(0, 8);
  }

  /** Creates (or, after a lost connection, finds) this session's node under parent; returns its name. */
  async enqueue(parent) {
    const conn = this.conn;
    await this.system.ensureParent(conn, parent);
    const tag = `lock-${this.guid}-`;
    const { res: created } = await this.system.retry(async () => {
      try {
        return await p((cb) =>
          conn.create(`${parent}/${tag}`, Buffer.alloc(0), zookeeper.ACL.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL, cb),
        );
      } catch (e) {
        if (e?.getCode?.() !== Exception.CONNECTION_LOSS) throw e;
        const kids = await p((cb) => conn.getChildren(parent, cb)).catch(() => []);
        const mine = kids.find((k) => k.startsWith(tag));
        if (mine) return `${parent}/${mine}`;
        throw e;
      }
    });
    return created.slice(parent.length + 1);
  }

  static seq(name) {
    return Number(name.slice(name.lastIndexOf('-') + 1));
  }

  async lock(name) {
    const conn = this.conn;
    const t = nowMs();
    const mine = await this.enqueue(name);
    for (;;) {
      const { res: kids } = await this.system.retry(() => p((cb) => conn.getChildren(name, cb)));
      kids.sort((a, b) => ZkSession.seq(a) - ZkSession.seq(b));
      const at = kids.indexOf(mine);
      if (at < 0) throw new Error(`lock node ${name}/${mine} vanished (session expired?)`);
      if (at === 0) return { name, path: `${name}/${mine}`, startedMs: t };
      const pred = `${name}/${kids[at - 1]}`;
      await new Promise((resolve, reject) => {
        conn.exists(
          pred,
          () => resolve(),
          (err, stat) => {
            if (err) reject(err);
            else if (!stat) resolve();
          },
        );
      }).catch(() => {});
    }
  }

  async tryLock(name) {
    const conn = this.conn;
    const mine = await this.enqueue(name);
    const { res: kids } = await this.system.retry(() => p((cb) => conn.getChildren(name, cb)));
    kids.sort((a, b) => ZkSession.seq(a) - ZkSession.seq(b));
    if (kids[0] === mine) return { name, path: `${name}/${mine}` };
    await this.system.retry(() => p((cb) => conn.remove(`${name}/${mine}`, -1, cb)));
    return null;
  }

  async unlock(handle) {
    await this.system.retry(async () => {
      try {
        await p((cb) => this.conn.remove(handle.path, -1, cb));
      } catch (e) {
        if (e?.getCode?.() !== Exception.NO_NODE) throw e;
      }
    });
  }

  /** ZooKeeper reads are served by the connected server (sequentially consistent, not linearizable). */
  async read(handle) {
    await this.system.retry(() => p((cb) => this.conn.getData(handle.path, cb)));
  }

  async close() {
    this.conn.close();
    this.system.conns.delete(this.conn);
  }
}
