/**
 * The simulated clients. Lock clients speak the cell's request API to the
 * node they last heard of (or any), exactly as gRPC callers do: a follower
 * forwards to the leader, a queued Acquire is held open on the leader, reads
 * go through the read barrier, and heartbeats go through the leader's
 * confirmation round (relayed by a follower). KV clients propose to and read
 * from the generic group core. Each client has one operation in flight and
 * gives up on it after a timeout, its outcome unknown.
 */
import { type FencerError, type NodeId, NodeId as toNodeId, type Random, type Result } from '@fencer/base';
import type { HeartbeatAnswer, Receipt, WireLockState } from '@fencer/cell';
import type { Holder, LockMode, LockState, Waiter } from '@fencer/lock-fsm';
import type { AckedWrite } from './checkers.js';
import { digest } from './hash.js';
import { KV_KEYS, encodePut } from './kv.js';
import type { LockReadAnswer } from './lock-checkers.js';
import {
  type LockClient,
  type LockOp,
  type LockWrite,
  isRetry,
  lockAnswered,
  lockClientDied,
  newLockClient,
  nextLockOp,
} from './lock-workload.js';
import { type SimNode, nodeOfAddress } from './sim-node.js';
import type { Simulation } from './simulation.js';
import { Tag } from './tags.js';
import { US_PER_MS, US_PER_SECOND } from './time.js';

const clientTimeoutUs = 2 * US_PER_SECOND;
const clientLatencyUs = 300;
/** Chance that a lock client's process dies before an operation (outside the quiet tail); it comes back with a new session. */
const clientDeathP = 0.006;

interface ClientState {
  readonly id: number;
  target: NodeId | null;
  /** The operation in flight (its id), or 0. */
  op: number;
  /** The lock workload's client (null with the KV machine). */
  readonly lock: LockClient | null;
  /** Where its session's heartbeats go (a node that said who leads, as a session proxy would follow). */
  heartbeatTarget: NodeId | null;
}

/** One operation in flight: its id, the node it goes to, `finish` (ends it once), and where its cancel goes. */
interface ClientOp {
  readonly op: number;
  readonly node: SimNode;
  readonly finish: (retarget: NodeId | null) => void;
  readonly onGiveUp: (cancel: () => void) => void;
}

/** Where a refused lock call says to go next: the simulated node its leader hint names. */
function hintedNode(error: FencerError): NodeId | null {
  return nodeOfAddress(error.leaderHint);
}

function modeFromWire(mode: number): LockMode {
  return mode === 2 ? 'SHARED' : 'EXCLUSIVE';
}

/** The contract's lock state back in the state machine's shape (the fields the checkers compare). */
export function lockFromWire(w: WireLockState): LockState {
  const holders: Holder[] = w.holders.map((h) => ({
    sessionId: h.sessionId as never,
    clientId: h.clientId,
    mode: modeFromWire(h.mode),
    token: h.token as never,
    lockDelayMs: 0,
  }));
  const waiters: Waiter[] = w.waiters.map((x) => ({
    sessionId: x.sessionId as never,
    clientId: x.clientId,
    mode: modeFromWire(x.mode),
    requestId: x.requestId as never,
    waitMs: 0,
    lockDelayMs: 0,
    queuedRevision: 0 as never,
  }));
  return { name: w.name, mode: w.mode === 0 ? null : modeFromWire(w.mode), holders, waiters, delayed: w.delayed };
}

export class SimClients {
  private nextOp = 1;
  private nextWriteId = 1;

  constructor(
    private readonly sim: Simulation,
    private readonly random: Random,
  ) {}

  start(): void {
    for (let c = 0; c < this.sim.options.clients; c++) {
      const client: ClientState = {
        id: c,
        target: null,
        op: 0,
        lock: this.sim.options.machine === 'lock' ? newLockClient(c) : null,
        heartbeatTarget: null,
      };
      this.startClient(client);
      if (client.lock) this.heartbeatLoop(client, client.lock);
    }
  }

  private startClient(client: ClientState, extraUs = 0): void {
    const think = extraUs + Math.round(this.sim.options.clientThinkMs * US_PER_MS * (0.2 + 1.6 * this.random.float()));
    this.sim.scheduler.after(think, Tag.client | (client.id << 16), () =>
      client.lock ? this.lockClientOp(client, client.lock) : this.kvClientOp(client),
    );
  }

  /**
   * Starts a client operation: its id, the node it goes to (the last one,
   * or any), and `finish`, which ends it once (with where to go next) and
   * schedules the next. It gives up after a timeout, its outcome unknown,
   * and cancels the call as a gRPC deadline would.
   */
  private beginClientOp(client: ClientState): ClientOp {
    const op = this.nextOp++;
    client.op = op;
    let target = client.target !== null ? this.sim.nodes.get(client.target) : undefined;
    if (!target || target.state === 'removed') target = this.random.pick(this.sim.live());
    client.target = target.id;
    let giveUp: (() => void) | null = null;
    const finish = (retarget: NodeId | null): void => {
      if (client.op !== op) return;
      client.op = 0;
      client.target = retarget;
      this.startClient(client);
    };
    this.sim.scheduler.after(clientTimeoutUs, Tag.client | (client.id << 16), () => {
      if (client.op !== op) return;
      this.sim.stats.clientTimeouts++;
      giveUp?.();
      finish(null);
    });
    return { op, node: target, finish, onGiveUp: (cancel) => (giveUp = cancel) };
  }

  private toNode(node: SimNode, fn: () => void): void {
    const life = node.life;
    this.sim.scheduler.after(clientLatencyUs, Tag.client | (node.num << 8), () => this.sim.onNode(node, life, fn));
  }

  private toClient(fn: () => void): void {
    this.sim.scheduler.after(clientLatencyUs, Tag.client, fn);
  }

  // ---- KV clients (the generic group core) ----

  private kvClientOp(client: ClientState): void {
    if (this.sim.scheduler.now >= this.sim.endUs - 4 * US_PER_SECOND) return; // Let the last operations settle before the final checks.
    const { op, node, finish } = this.beginClientOp(client);
    const key = this.random.int(KV_KEYS);
    const retargetOf = (error: FencerError): NodeId | null => (error.leaderHint !== undefined ? toNodeId(error.leaderHint) : null);
    if (this.random.chance(this.sim.options.readShare)) {
      const barrier = this.sim.checkers.readBarrier();
      this.toNode(node, () => {
        const program = node.program;
        if (program?.kind !== 'kv') return;
        program.core.readBarrier((error) => {
          if (error) return this.toClient(() => finish(retargetOf(error)));
          this.sim.checkers.readServed(node.id, barrier, key, program.core.replica.applied, program.kv.versions[key] as number);
          this.toClient(() => finish(node.id));
        });
      });
      return;
    }
    const writeId = this.nextWriteId++;
    const data = encodePut(key, writeId);
    this.toNode(node, () => {
      const program = node.program;
      if (program?.kind !== 'kv') return;
      program.core.propose(data, (outcome) => {
        if (!outcome.ok) {
          this.sim.stats.writesFailed++;
          return this.toClient(() => finish(retargetOf(outcome.error)));
        }
        const { index, term } = outcome.value;
        this.toClient(() => {
          if (client.op !== op) return; // The client gave up before the answer came.
          this.ackWrite({ writeId, key, index, term, digest: digest(0, data), ackUs: this.sim.scheduler.now });
          finish(node.id);
        });
      });
    });
  }

  private ackWrite(ack: AckedWrite): void {
    this.sim.checkers.ackedWrite(ack);
    this.sim.stats.writesAcked++;
    if (this.sim.quiet) this.sim.tailAcks++;
  }

  // ---- lock clients (the cell's request API) ----

  /**
   * One operation of a lock client: a write sent to its target node
   * (retried as the same request until answered), or a linearizable read.
   */
  private lockClientOp(client: ClientState, lc: LockClient): void {
    if (this.sim.scheduler.now >= this.sim.endUs - 4 * US_PER_SECOND) return;
    if (!this.sim.quiet && lc.session !== null && this.random.chance(clientDeathP)) {
      // The client's process dies: its session stays until the leader expires it; it comes back later.
      this.sim.stats.clientDeaths++;
      this.sim.note(`client ${client.id} dies with ${lc.session.id}`);
      lockClientDied(lc);
      client.target = null;
      this.startClient(client, this.random.range(1 * US_PER_SECOND, 6 * US_PER_SECOND));
      return;
    }
    const call = this.beginClientOp(client);
    const next = nextLockOp(lc, this.random, this.sim.options.readShare);
    if (next.kind === 'read') this.lockRead(client, call, next);
    else this.lockWrite(client, lc, call, next.write);
  }

  /** A linearizable read (CheckToken when the client knows a token, else GetLock), checked against the acknowledged grants. */
  private lockRead(client: ClientState, call: ClientOp, next: Extract<LockOp, { kind: 'read' }>): void {
    const { op, node, finish, onGiveUp } = call;
    const barrier = this.sim.lockCheckers.readBarrier(next.name);
    this.toNode(node, () => {
      const cell = node.cell;
      if (!cell) return;
      const served = (outcome: Result<unknown, FencerError>, read: (value: never) => { revision: number; answer: LockReadAnswer }): void =>
        this.toClient(() => {
          if (client.op !== op) return;
          if (!outcome.ok) return finish(hintedNode(outcome.error));
          // No import ever raises the simulated cell's revision base: a read's revision is the index it was served at.
          const { revision, answer } = read(outcome.value as never);
          this.sim.lockCheckers.readServed(node.id, barrier, revision, answer);
          finish(node.id);
        });
      const cancel =
        next.token !== null
          ? cell.call('checkToken', { name: next.name, token: next.token }, { forwarded: false }, (o) =>
              served(o, (v: { current: boolean; latestToken: number; revision: number }) => ({
                revision: v.revision,
                answer: {
                  kind: 'CheckToken',
                  token: next.token as number,
                  answer: { current: v.current, latestToken: v.latestToken as never },
                },
              })),
            )
          : cell.call('getLock', { name: next.name }, { forwarded: false }, (o) =>
              served(o, (v: { lock: WireLockState | undefined; revision: number }) => ({
                revision: v.revision,
                answer: {
                  kind: 'GetLock',
                  state: v.lock
                    ? lockFromWire(v.lock)
                    : lockFromWire({ name: next.name, mode: 0, holders: [], waiters: [], delayed: false }),
                },
              })),
            );
      onGiveUp(() => this.sim.onNode(node, node.life, cancel));
    });
  }

  /** A write sent to the client's target node (retried as the same request until answered); its receipt is an acknowledged write. */
  private lockWrite(client: ClientState, lc: LockClient, call: ClientOp, w: LockWrite): void {
    const { op, node, finish, onGiveUp } = call;
    this.toNode(node, () => {
      const cell = node.cell;
      if (!cell) return;
      const cancel = cell.call(
        w.method,
        w.request as never,
        { forwarded: false },
        (outcome: Result<unknown, FencerError>, receipt?: Receipt) =>
          this.toClient(() => {
            if (client.op !== op) return; // The client gave up before the answer came.
            if (receipt)
              this.ackWrite({
                writeId: op,
                index: receipt.index,
                term: receipt.term,
                digest: digest(0, receipt.data),
                ackUs: this.sim.scheduler.now,
              });
            if (!outcome.ok && isRetry(outcome.error)) this.sim.stats.writesFailed++;
            const { grant } = lockAnswered(lc, w, outcome);
            if (grant) this.sim.lockCheckers.ackedGrant(grant);
            finish(outcome.ok ? node.id : hintedNode(outcome.error));
          }),
      );
      onGiveUp(() => this.sim.onNode(node, node.life, cancel));
    });
  }

  /**
   * A live client's session heartbeats, three per TTL, to the leader as far
   * as the client knows (never logged: only the leader's deadline moves).
   * They go on to the end of the run, after the client's last operation:
   * sessions that stopped then would expire in the last seconds and leave
   * entries committed too late for every member to apply them. An
   * acknowledged heartbeat is a lease the early-expiry checker holds the
   * cell to, from when it was sent.
   */
  private heartbeatLoop(client: ClientState, lc: LockClient): void {
    const periodUs = Math.round(((lc.session?.ttlMs ?? 1_500) * US_PER_MS) / 3);
    this.sim.scheduler.after(periodUs, Tag.client | (client.id << 16), () => {
      const session = lc.session;
      let node = client.heartbeatTarget !== null ? this.sim.nodes.get(client.heartbeatTarget) : undefined;
      // A target that is down (its connection broke) or gone: try any node.
      if (!node || node.state !== 'up') node = this.random.pick(this.sim.live());
      const target = node;
      if (session) {
        const sentUs = this.sim.scheduler.now;
        const clocks = this.sim.clocksAt(sentUs);
        this.toNode(target, () => {
          target.cell?.heartbeat([session.id], { forwarded: false }, (r: Result<HeartbeatAnswer[], FencerError>) =>
            this.toClient(() => {
              if (!r.ok) {
                client.heartbeatTarget = nodeOfAddress(r.error.leaderHint);
                return;
              }
              client.heartbeatTarget = target.id;
              for (const a of r.value)
                if (a.ttlMsRemaining > 0) this.sim.lockCheckers.heartbeatAcked(a.sessionId, sentUs, a.ttlMsRemaining, clocks);
            }),
          );
        });
      }
      this.heartbeatLoop(client, lc);
    });
  }
}
