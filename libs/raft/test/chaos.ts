/**
 * Randomized fault schedules over the in-memory network, a small cousin of
 * libs/sim that lives here so the core is exercised by its own tests. The
 * network's checkers throw on any safety violation (two leaders in a term,
 * different entries applied at an index, a commit index going back, a new
 * leader missing a committed entry, a stale ReadIndex read, a leader
 * overwriting its log); at the end the faults stop and the run must
 * converge.
 *
 * Besides the general schedule, each recipe aims at the conditions under
 * which one of the bug switches becomes visible; they double as advice for
 * the simulator (which bug needs which faults).
 */
import { NodeId } from '@fencer/base';
import { ConfChangeType, MessageType, type ConfChange, type RaftBug } from '../src/index.js';
import { bytes, Network } from './network.js';

export type Recipe =
  /** Everything at once: crashes, partitions, isolated leaders, lossy/slow network, transfers, demote/promote, reads. */
  | 'general'
  /** The course's Figure 8: leaders crash often, messages are slow, one entry per append. */
  | 'figure8'
  /** Three nodes without pre-vote; a node restarts right after granting a vote. */
  | 'vote-restart'
  /** Two membership changes proposed back to back, then the leader and one follower are cut off. */
  | 'conf-split'
  /** Three nodes without pre-vote, messages delayed up to an election timeout, leaders isolated often. */
  | 'stale';

export interface ChaosOptions {
  recipe?: Recipe;
  bugs?: Partial<Record<RaftBug, boolean>>;
  steps?: number;
}

export interface ChaosResult {
  commands: number;
  reads: number;
  terms: number;
}

const allIds = ['a', 'b', 'c', 'd', 'e'];

export function runChaos(seed: number, options: ChaosOptions = {}): ChaosResult {
  const recipe = options.recipe ?? 'general';
  const ids = recipe === 'vote-restart' || recipe === 'stale' ? allIds.slice(0, 3) : allIds;
  const net = new Network({
    ids,
    seed,
    snapshotEvery: 15,
    config: {
      snapshotChunkBytes: 96,
      maxEntriesPerMsg: recipe === 'figure8' ? 1 : 8,
      maxInflightMsgs: 4,
      preVote: !(recipe === 'vote-restart' || recipe === 'stale'),
      bugs: options.bugs ?? {},
    },
  });
  const r = net.rnd;
  if (recipe === 'vote-restart') {
    net.afterReady = (n, rd) => {
      const granted = rd.messages.some((m) => m.type === MessageType.RequestVoteResponse && m.reject === false);
      if (granted && r.chance(0.5)) n.restart();
    };
  }
  const counters: Counters = { cmd: 0, reads: 0, pendingDemotion: null };
  const steps = options.steps ?? 400;
  for (let step = 0; step < steps; step++) {
    const leader = net.leader();
    if (leader !== undefined && r.chance(0.6)) {
      for (let k = r.range(1, 3); k > 0; k--) leader.node.propose(bytes(`c${counters.cmd++}`));
    }
    switch (recipe) {
      case 'general':
        generalFaults(net, ids, counters);
        break;
      case 'figure8':
        net.delayTicksMax = 3;
        net.tick(r.chance(0.1) ? r.range(1, 20) : r.range(1, 3));
        if (leader !== undefined && r.chance(0.5)) net.crash(leader.id);
        if (net.live().length < 3) net.restart(r.pick([...net.down]));
        continue;
      case 'vote-restart':
      case 'stale':
        net.delayTicksMax = recipe === 'stale' ? 10 : 3;
        if (r.chance(0.2) && leader !== undefined) net.isolate(leader.id);
        if (r.chance(0.2)) net.heal();
        net.tick(r.range(1, 15));
        continue;
      case 'conf-split':
        if (leader !== undefined && r.chance(0.2)) twoChangesThenSplit(net, ids, leader.id);
        if (r.chance(0.15)) net.heal();
        net.tick(r.range(1, 5));
        continue;
    }
    net.tick(r.chance(0.05) ? r.range(10, 30) : r.range(1, 3));
  }
  // Faults stop: everyone back, reliable network, all voters again.
  net.afterReady = null;
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
  return { commands: all.length, reads: counters.reads, terms: net.leaderOfTerm.size };
}

interface Counters {
  cmd: number;
  reads: number;
  /** A voter demoted to learner by the general schedule, to be promoted back next. */
  pendingDemotion: string | null;
}

function generalFaults(net: Network, ids: readonly string[], counters: Counters): void {
  const r = net.rnd;
  const leader = net.leader();
  const roll = r.int(100);
  if (roll < 15) {
    if (leader !== undefined && net.read(leader.id, `r${counters.reads}`)) counters.reads++;
  } else if (roll < 22) {
    const live = net.live();
    if (live.length > Math.floor(ids.length / 2) + 1) net.crash(r.pick(live).id);
  } else if (roll < 32) {
    if (net.down.size > 0) net.restart(r.pick([...net.down]));
  } else if (roll < 37) {
    const shuffled = r.shuffle([...ids]);
    const cut = r.range(1, 2);
    net.partition(shuffled.slice(0, cut), shuffled.slice(cut));
  } else if (roll < 41) {
    if (leader !== undefined) net.isolate(leader.id);
  } else if (roll < 50) {
    net.heal();
  } else if (roll < 54) {
    net.dropRate = r.pick([0, 0.05, 0.2]);
    net.delayTicksMax = r.pick([0, 1, 3]);
    net.duplicateRate = r.pick([0, 0.05]);
  } else if (roll < 58) {
    if (leader !== undefined) leader.node.transferLeadership(NodeId(r.pick(ids)));
  } else if (roll < 62 && leader !== undefined) {
    // One voter at a time goes to learner and comes back, through the log.
    const demoted = counters.pendingDemotion;
    if (demoted === null) {
      const victim = r.pick(ids.filter((id) => id !== leader.id));
      if (leader.node.proposeConfChange({ type: ConfChangeType.AddLearner, node: NodeId(victim) }) !== null)
        counters.pendingDemotion = victim;
    } else if (leader.node.proposeConfChange({ type: ConfChangeType.AddVoter, node: NodeId(demoted) }) !== null) {
      counters.pendingDemotion = null;
    }
  }
}

/** Demotes or promotes two nodes back to back, then cuts the leader and one follower off from the rest. */
function twoChangesThenSplit(net: Network, ids: readonly string[], leaderId: string): void {
  const r = net.rnd;
  const leader = net.get(leaderId).node;
  const status = leader.status();
  const voters = status.voters.filter((v) => v !== leaderId);
  const changes: ConfChange[] = [];
  for (const l of status.learners) changes.push({ type: ConfChangeType.AddVoter, node: l });
  for (const v of r.shuffle([...voters])) changes.push({ type: ConfChangeType.AddLearner, node: v });
  const [first, second] = changes as [ConfChange, ConfChange];
  if (leader.proposeConfChange(first) === null || leader.proposeConfChange(second) === null) return;
  const buddy = r.pick(ids.filter((id) => id !== leaderId));
  net.partition(
    [leaderId, buddy],
    ids.filter((id) => id !== leaderId && id !== buddy),
  );
}
