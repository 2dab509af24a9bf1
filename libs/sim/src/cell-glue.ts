/**
 * What a simulated node runs in one life: the production LockCell (or, for
 * the KV machine, @fencer/group's GroupCore, which the cell builds on) over virtual
 * time, the simulated network and the run's checkers. Nothing here
 * re-implements the cell: the environment is injected (clock, randomness,
 * timers, transport, fatal errors), forwarding to the leader travels the
 * simulated network, and the checkers watch through the cell's test hooks.
 */
import { createReplica } from '@fencer/replica/testing';
import { type NodeId, assert } from '@fencer/base';
import {
  type CallDone,
  type Cancel,
  type CellEnv,
  type CellMethod,
  type LeaderForwarder,
  LockCell,
  type LockCellConfig,
  type RequestOf,
  type ResponseOf,
  noopCellMetrics,
} from '@fencer/cell';
import { GroupCore, type GroupConfig } from '@fencer/group';
import type { Message } from '@fencer/raft';
import { noopLogger } from '@fencer/replica';
import type { LockStateMachine } from '@fencer/lock-fsm';
import type { RaftLogStore } from '@fencer/wal';
import { digest } from './hash.js';
import { KvStateMachine } from './kv.js';
import { plantedHooks } from './planted.js';
import { type NodeProgram, type SimNode, simAddress, simPeerAddress } from './sim-node.js';
import type { Simulation } from './simulation.js';
import { Tag } from './tags.js';
import { US_PER_MS, US_PER_SECOND } from './time.js';

/** The cell library's settings on every simulated node: production's shape, sized for short runs. */
function groupConfig(sim: Simulation, node: SimNode): GroupConfig {
  const o = sim.options;
  return {
    id: node.id,
    // The bootstrap nodes write the first membership into the log; a joiner starts empty and learns it by replication.
    peers: new Map(sim.bootstrap.map((id) => [id, simAddress(id)])),
    join: !sim.bootstrap.includes(node.id),
    replica: {
      raft: {
        electionTicks: o.electionTicks,
        heartbeatTicks: o.heartbeatTicks,
        preVote: o.preVote,
        broadcastCommit: o.broadcastCommit,
        maxEntriesPerMsg: o.maxEntriesPerMsg,
        maxBytesPerMsg: 64 * 1024,
        maxInflightMsgs: 16,
        snapshotChunkBytes: 64,
      },
      snapshotEveryEntries: o.snapshotEveryEntries,
      readTimeoutTicks: 3 * o.electionTicks,
      bugs: o.bugs,
    },
    readsWaitingMax: 1_000,
    defaultPeerAddress: (address) => simPeerAddress(address.replace(/^sim-(.+):7001$/, '$1') as NodeId),
  };
}

function lockCellConfig(sim: Simulation, node: SimNode): LockCellConfig {
  return {
    ...groupConfig(sim, node),
    tickMs: sim.options.tickMs,
    ttlDefaultMs: 5_000,
    ttlMinMs: 1_000,
    ttlMaxMs: 60_000,
    waitingCallsMax: 1_000,
    watchHistoryMax: 1_000,
    watcherBufferMax: 1_000,
    watchersMax: 16,
    watchProgressMs: 1_000,
    heartbeatRoundSpacingMs: 5,
    autoClaim: true,
  };
}

function envFor(sim: Simulation, node: SimNode, life: number): CellEnv {
  const now = (): number => sim.scheduler.now;
  return {
    clock: { monoMs: () => node.monoMs(now()), wallMs: () => 1_700_000_000_000 + node.monoMs(now()) },
    random: node.random.fork(),
    logger: noopLogger,
    metrics: noopCellMetrics,
    send: (messages: readonly Message[]) => {
      if (node.life !== life) return;
      for (const m of messages) {
        assert(m.from === node.id, 'a replica sends only as itself');
        if (m.type === 'AppendEntries' || m.type === 'Heartbeat' || m.type === 'InstallSnapshot')
          sim.checkers.leaderMessage(node.id, m.term);
        else if (m.type === 'RequestVoteResponse' && m.reject !== true) sim.nemesis.voteGranted(node, m.to, m.term);
      }
      sim.network.send(messages);
    },
    onFatal: (error) => {
      if (node.life !== life) return;
      // An fsync error: the process exits. Crash the node; it restarts later.
      sim.crash(node, `fatal: ${error.message}`, sim.nemesisRandom.range(200 * US_PER_MS, 4 * US_PER_SECOND));
    },
    // A timer of the node's process: it runs on the node's drifting clock and waits out pauses.
    after: (ms, run) => {
      let live = true;
      const delayUs = Math.max(1, Math.round((ms * US_PER_MS) / node.rate));
      sim.scheduler.after(delayUs, Tag.tick | (node.num << 8), () => {
        if (live) sim.onNode(node, life, run);
      });
      return () => (live = false);
    },
    observer: {
      softStateChanged: (soft, term) => {
        if (node.life === life) sim.roleChanged(node, soft.role, term);
      },
      applied: (entry) => {
        if (node.life === life) sim.checkers.appliedEntry(node.id, entry.index, entry.term, digest(entry.type, entry.data));
      },
      snapshotInstalled: () => {
        sim.stats.snapshotsInstalled++;
      },
    },
  };
}

/**
 * Forwarding between simulated nodes: the call travels the simulated network
 * (a cut link loses it; the sender's cell then times it out), runs on the
 * leader's cell as a forwarded call, and its answer travels back.
 */
function forwarderFor(sim: Simulation, from: SimNode, fromLife: number): LeaderForwarder {
  const relay = <T>(
    leader: NodeId,
    call: (to: SimNode, answer: (...a: T[]) => void) => Cancel | void,
    done: (...a: T[]) => void,
  ): Cancel => {
    const to = sim.nodes.get(leader);
    let cancelled = false;
    let cancelThere: Cancel | undefined;
    if (to === undefined) return () => {};
    sim.rpc(from, to, () => {
      cancelThere =
        call(to, (...a) =>
          sim.rpc(to, from, () => {
            if (!cancelled && from.life === fromLife) done(...a);
          }),
        ) ?? undefined;
    });
    return () => {
      cancelled = true;
      if (cancelThere) sim.rpc(from, to, () => cancelThere?.());
    };
  };
  return {
    forward<M extends CellMethod>(
      leader: NodeId,
      _address: string,
      method: M,
      request: RequestOf<M>,
      done: CallDone<ResponseOf<M>>,
    ): Cancel {
      return relay(
        leader,
        (to, answer) => to.cell?.call(method, request, { forwarded: true }, (o, r) => answer(o, r)),
        (o, r) => done(o as never, r as never),
      );
    },
    heartbeats(leader, _address, sessionIds, done): Cancel {
      return relay(
        leader,
        (to, answer) => to.cell?.heartbeat(sessionIds, { forwarded: true }, (r) => answer(r)),
        (r) => done(r as never),
      );
    },
  };
}

/** The program of one life of `node` over its freshly opened store. */
export function programFor(sim: Simulation, node: SimNode, store: RaftLogStore, life: number): NodeProgram {
  const env = envFor(sim, node, life);
  if (sim.options.machine === 'kv') {
    const kv = new KvStateMachine();
    const core = new GroupCore(groupConfig(sim, node), store, kv, env, { becameLeader: () => {}, steppedDown: () => {} }, createReplica);
    core.open();
    return { kind: 'kv', core, kv };
  }
  const checkers = sim.lockCheckers;
  const cell = new LockCell(lockCellConfig(sim, node), store, env, forwarderFor(sim, node, life), {
    ...plantedHooks(sim.options.planted, () => mostLagging(sim, node)),
    makeReplica: createReplica,
    applied: (entry, command, applied, fsm) => {
      if (node.life !== life) return;
      checkers.applied(node.id, applied.index, command, applied, (name) => fsm.getLock(name));
      if (command.kind === 'ExpireSession' && applied.outcome.ok) checkers.expiryApplied(command.sessionId, entry.term, sim.scheduler.now);
    },
    dutyProposed: (command) => {
      if (node.life !== life) return;
      sim.note(`${node.id} proposes ${command.kind} ${'sessionId' in command ? command.sessionId : command.name}`);
      // Attributed to the term this node leads in the Raft core right now. The cell may still believe it
      // leads for the length of a ready (its view changes once the ready is persisted); the core then
      // refuses the proposal, which belongs to no term.
      const status = node.replica?.status();
      if (command.kind === 'ExpireSession' && status?.role === 'leader') {
        checkers.expiryProposed(command.sessionId, status.term, node.id, sim.scheduler.now, node.monoMs(sim.scheduler.now));
      }
    },
  });
  return { kind: 'lock', cell };
}

/** The planted stale read: the up replica furthest behind (`node` itself if none is). */
function mostLagging(sim: Simulation, node: SimNode): LockStateMachine {
  let best = node;
  for (const n of sim.nodes.values()) {
    if (n.state === 'up' && n.cell && n.replica && n.replica.applied < (best.replica?.applied ?? 0)) best = n;
  }
  return (best.cell ?? (node.cell as LockCell)).fsm;
}
