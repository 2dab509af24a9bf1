/**
 * A randomized fault schedule over the in-memory network: crashes and
 * restarts, partitions, an isolated leader, a lossy/duplicating/slow
 * network, leadership transfers, demoting and promoting a voter,
 * snapshots, proposals and ReadIndex reads. The network's checkers throw on
 * any safety violation; at the end faults stop and the run must converge.
 * A small cousin of libs/sim, living here so the core is exercised by its
 * own tests.
 */
import { NodeId } from '@fencer/base';
import { ConfChangeType, type RaftBug } from '../src/index.js';
import { bytes, Network } from './network.js';

export interface ChaosResult {
  commands: number;
  reads: number;
  terms: number;
}

export interface ChaosOptions {
  bugs?: Partial<Record<RaftBug, boolean>>;
  preVote?: boolean;
  maxEntriesPerMsg?: number;
  /** Longest message delay, in ticks, when the network turns slow. */
  delayTicksMax?: number;
  nodes?: number;
}

export function runChaos(seed: number, steps: number, options: ChaosOptions = {}): ChaosResult {
  const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].slice(0, options.nodes ?? 5);
  const net = new Network({
    ids,
    seed,
    snapshotEvery: 15,
    config: {
      snapshotChunkBytes: 96,
      maxEntriesPerMsg: options.maxEntriesPerMsg ?? 8,
      maxInflightMsgs: 4,
      bugs: options.bugs ?? {},
      preVote: options.preVote ?? true,
    },
  });
  const r = net.rnd;
  let cmd = 0;
  let reads = 0;
  let pendingDemotion: string | null = null;
  for (let step = 0; step < steps; step++) {
    const leader = net.leader();
    const roll = r.int(100);
    if (roll < 40) {
      if (leader !== undefined) for (let k = r.range(1, 3); k > 0; k--) leader.node.propose(bytes(`c${cmd++}`));
    } else if (roll < 50) {
      if (leader !== undefined && net.read(leader.id, `r${reads}`)) reads++;
    } else if (roll < 56) {
      const live = net.live();
      if (live.length > Math.floor(ids.length / 2) + 1) net.crash(r.pick(live).id);
    } else if (roll < 64) {
      if (net.down.size > 0) net.restart(r.pick([...net.down]));
    } else if (roll < 68) {
      const shuffled = r.shuffle([...ids]);
      const cut = r.range(1, 2);
      net.partition(shuffled.slice(0, cut), shuffled.slice(cut));
    } else if (roll < 71) {
      if (leader !== undefined) net.isolate(leader.id);
    } else if (roll < 78) {
      net.heal();
    } else if (roll < 81) {
      net.dropRate = r.pick([0, 0.05, 0.2]);
      net.delayTicksMax = r.pick([0, 1, options.delayTicksMax ?? 3]);
      net.duplicateRate = r.pick([0, 0.05]);
    } else if (roll < 84) {
      if (leader !== undefined) leader.node.transferLeadership(NodeId(r.pick(ids)));
    } else if (roll < 87) {
      // One voter at a time goes to learner and comes back, through the log.
      if (leader !== undefined) {
        if (pendingDemotion === null) {
          const victim = r.pick(ids.filter((id) => id !== leader.id));
          if (leader.node.proposeConfChange({ type: ConfChangeType.AddLearner, node: NodeId(victim) }) !== null) pendingDemotion = victim;
        } else if (leader.node.proposeConfChange({ type: ConfChangeType.AddVoter, node: NodeId(pendingDemotion) }) !== null) {
          pendingDemotion = null;
        }
      }
    }
    net.tick(r.chance(0.05) ? r.range(10, 30) : r.range(1, 3));
  }
  // Faults stop: everyone back, reliable network, all voters again.
  net.heal();
  for (const id of [...net.down]) net.restart(id);
  net.dropRate = 0;
  net.delayTicksMax = 0;
  net.duplicateRate = 0;
  net.waitLeader(300);
  for (const id of ids) {
    const status = net.leader()?.node.status();
    if (status?.learners.includes(NodeId(id))) net.changeConf({ type: ConfChangeType.AddVoter, node: NodeId(id) });
  }
  net.one('final', ids.length, 600);
  net.tick(20);
  net.checkLogMatching();
  const all = net.get('a').machine.commands;
  for (const n of net.nodes.values()) {
    if (JSON.stringify(n.machine.commands) !== JSON.stringify(all)) throw new Error(`seed ${seed}: ${n.id} did not converge`);
  }
  return { commands: all.length, reads: reads, terms: net.leaderOfTerm.size };
}
