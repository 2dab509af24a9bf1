/**
 * The nemesis: the faults a run injects, chosen by weight from the fault mix
 * at random intervals until the quiet tail: partitions (rolling, one-way by
 * shape), crashes and fsync errors, pauses, clock drift, leadership
 * transfers, membership changes, lossy links, slow disks, spurious
 * connection resets (connection-resets.ts), and the scripted
 * schedules (amnesia after a vote, leaders killed in infancy, Figure 8).
 * It acts on the simulation's nodes and network; its randomness is its own
 * stream of the run's seed.
 */
import { type NodeId, type Random, NodeId as toNodeId } from '@fencer/base';
import { type ConfChange, ConfChangeType } from '@fencer/raft';
import type { Command } from '@fencer/lock-fsm';
import type { FaultMix } from './options.js';
import { type NetworkProfile, faultyNetwork } from './network.js';
import { PARTITION_SHAPES, cutBetween, makePartition } from './partitions.js';
import { type SimNode, simAddress, simPeerAddress } from './sim-node.js';
import type { Simulation } from './simulation.js';
import { Tag } from './tags.js';
import { US_PER_MS, US_PER_SECOND } from './time.js';

export class Nemesis {
  /** One membership change at a time (the doubleConfChange scenario breaks the rule on purpose). */
  private membershipBusy = false;
  readonly faulty: NetworkProfile;

  constructor(
    private readonly sim: Simulation,
    private readonly random: Random,
    private readonly nodesMax: number,
  ) {
    this.faulty = { ...faultyNetwork, ...sim.options.network };
  }

  /** A node became leader: the leaderInfancy fault and the Figure 8 schedule act on new leaders. */
  leaderElected(node: SimNode): void {
    if (!this.sim.quiet && (this.infantLeaders > 0 || this.random.chance(this.sim.options.leaderChurnP))) this.killInfant(node);
    const hook = this.leaderHook;
    if (hook && !this.sim.quiet) {
      this.leaderHook = null;
      hook(node);
    }
  }

  /** Who granted votes to whom, for the latest term seen: the amnesia fault's partition follows it. */
  private votesTerm = 0;
  private readonly votesFor = new Map<string, Set<string>>();
  amnesiaArmed = false;

  private readonly votedIn = new Map<string, string>();

  voteGranted(voter: SimNode, candidate: NodeId, term: number): void {
    const key = `${voter.id}:${term}`;
    const before = this.votedIn.get(key);
    if (before !== undefined && before !== candidate) this.sim.stats.doubleVotes++;
    this.votedIn.set(key, candidate);
    if (term > this.votesTerm) {
      this.votesTerm = term;
      this.votesFor.clear();
    }
    if (term === this.votesTerm) {
      let set = this.votesFor.get(candidate);
      if (!set) this.votesFor.set(candidate, (set = new Set()));
      set.add(voter.id);
    }
    if (!this.amnesiaArmed || this.sim.quiet) return;
    this.amnesiaArmed = false;
    const r = this.random;
    // Not from inside the replica's send: the power cut comes right after it.
    this.sim.scheduler.after(0, Tag.nemesis, () => this.sim.crash(voter, 'amnesia', r.range(5 * US_PER_MS, 20 * US_PER_MS)));
    // Once the vote has reached the candidate, cut the candidate (and its other voters)
    // off from the rest, before its first append reaches the restarted voter.
    this.sim.scheduler.after(r.range(2 * US_PER_MS, 4 * US_PER_MS), Tag.nemesis, () => {
      if (this.sim.quiet) return;
      const voters = this.votesFor.get(candidate) ?? new Set<string>();
      const side = [candidate, ...[...voters].filter((v) => v !== voter.id && v !== candidate)] as NodeId[];
      const rest = this.sim
        .live()
        .map((n) => n.id)
        .filter((id) => !side.includes(id));
      const epoch = ++this.sim.partitionEpoch;
      this.sim.stats.partitions++;
      this.sim.note(`partition amnesia ${side.join(',')} | ${rest.join(',')}`);
      this.sim.network.setCut(cutBetween(side, rest));
      this.sim.scheduler.after(r.range(1_500 * US_PER_MS, 4 * US_PER_SECOND), Tag.nemesis, () => {
        if (this.sim.partitionEpoch === epoch) this.sim.network.heal();
      });
    });
  }

  /** The next new leader is handed to this (the Figure 8 schedule waits for elections). */
  leaderHook: ((leader: SimNode) => void) | null = null;

  /**
   * Figure 8 (Raft paper §5.4.2), with roles cast from the live nodes: S1 the
   * leader, S2 a follower; S3..S5 the rest, one of whom (S5) wins the next
   * election.
   */
  private figure8(): void {
    const r = this.random;
    const s1 = this.sim.leader();
    const live = this.sim.up();
    if (!s1 || live.length < 5 || this.leaderHook) return;
    const others = r.shuffle(live.filter((n) => n !== s1).map((n) => n.id));
    const s2 = others[0] as NodeId;
    const rest = others.slice(1);
    const all = live.map((n) => n.id);
    const epoch = ++this.sim.partitionEpoch;
    const cut = (links: ReturnType<typeof cutBetween>, why: string): boolean => {
      if (this.sim.partitionEpoch !== epoch || this.sim.quiet) return false;
      this.sim.note(`figure8 ${why}`);
      this.sim.network.setCut(links);
      return true;
    };
    // (a) S1 and S2 are cut off from the rest: S1's new entries reach S2 only.
    cut(cutBetween([s1.id, s2], rest), `(a) ${s1.id},${s2} | ${rest.join(',')}`);
    this.sim.stats.partitions++;
    const giveUp = (): void => {
      if (this.sim.partitionEpoch !== epoch) return;
      this.leaderHook = null;
      this.sim.network.heal();
      for (const n of this.sim.nodes.values()) n.diskSlowFactor = 1;
    };
    this.sim.scheduler.after(12 * US_PER_SECOND, Tag.nemesis, giveUp);
    this.leaderHook = (s5) => {
      // (b) The rest elect S5; it appends in its term but is cut off at once, so its entries stay on it.
      if (!rest.includes(s5.id)) return giveUp();
      if (!cut(cutBetween([s5.id], all), `(b) ${s5.id} alone`)) return;
      const voters = rest.filter((id) => id !== s5.id);
      // (c) Everyone but S5 talks again; slow disks on S3/S4 stretch the time they hold an old-term
      // entry without the new leader's own. S1 or S2 (they hold the longest log) leads next.
      for (const id of voters) {
        const n = this.sim.nodes.get(id);
        if (n) n.diskSlowFactor = 50;
      }
      this.leaderHook = (lead) => {
        if (lead.id !== s1.id && lead.id !== s2) return giveUp();
        const partner = lead.id === s1.id ? s2 : s1.id;
        // (d) It dies mid-replication, its partner too; S5 comes back to S3 and S4.
        this.sim.scheduler.after(r.range(20 * US_PER_MS, 400 * US_PER_MS), Tag.nemesis, () => {
          if (this.sim.partitionEpoch !== epoch || this.sim.quiet) return;
          this.sim.note(`figure8 (d) ${lead.id} and ${partner} die; ${s5.id} returns`);
          const p = this.sim.nodes.get(partner);
          this.sim.crash(lead, 'figure8', r.range(2 * US_PER_SECOND, 5 * US_PER_SECOND));
          if (p) this.sim.crash(p, 'figure8', r.range(2 * US_PER_SECOND, 5 * US_PER_SECOND));
          this.sim.network.heal();
        });
      };
    };
  }

  /** How many of the next new leaders the leaderInfancy fault still kills. */
  infantLeaders = 0;

  killInfant(node: SimNode): void {
    if (this.infantLeaders > 0) this.infantLeaders--;
    const r = this.random;
    const life = node.life;
    // Late enough to have appended (and maybe replicated a little), too early for much else.
    const [lo, hi] = this.sim.options.leaderLifetimeMs;
    this.sim.scheduler.after(r.range(Math.round(lo * US_PER_MS), Math.round(hi * US_PER_MS)), Tag.nemesis, () => {
      if (node.life !== life || this.sim.quiet) return;
      this.sim.crash(node, 'leader infancy', r.range(50 * US_PER_MS, 600 * US_PER_MS));
    });
  }

  scheduleNemesis(): void {
    const gap = Math.round(this.sim.options.faultEveryMs * US_PER_MS * (0.25 + 1.5 * this.random.float()));
    this.sim.scheduler.after(gap, Tag.nemesis, () => {
      if (this.sim.quiet) return;
      this.reconcileMembership();
      this.nemesisStep();
      this.scheduleNemesis();
    });
  }

  private nemesisStep(): void {
    const kind = this.pickFault();
    if (kind === null) return;
    this.sim.note(kind);
    if (kind !== 'connectionReset') this.sim.resets.otherFault();
    const r = this.random;
    switch (kind) {
      case 'partition':
        return this.partitionFor(r.range(1 * US_PER_SECOND, 6 * US_PER_SECOND));
      case 'rollingPartition':
        return this.rollingPartition();
      case 'crash':
        return this.crashSome();
      case 'pause':
        return this.pauseOne();
      case 'drift': {
        const node = r.pick(this.sim.live());
        node.setRate(this.sim.scheduler.now, 0.7 + 0.6 * r.float());
        return;
      }
      case 'transfer':
        return this.transferLeadership();
      case 'membership':
        return this.sim.options.doubleConfChange && r.chance(0.7) ? this.doubleConfChange() : this.changeMembership();
      case 'lossyNetwork':
        return this.lossyNetwork();
      case 'amnesia':
        return this.armAmnesia();
      case 'leaderInfancy': {
        this.infantLeaders = r.range(2, 5);
        // Start the chain by killing the current leader now.
        const leader = this.sim.leader();
        if (leader) this.sim.crash(leader, 'leader infancy', r.range(50 * US_PER_MS, 1 * US_PER_SECOND));
        return;
      }
      case 'figure8':
        return this.figure8();
      case 'slowDisk':
        return this.slowDisk();
      case 'connectionReset':
        return this.sim.resets.spurious();
    }
  }

  /** A fault kind drawn by the options' weights; null when every weight is 0. */
  private pickFault(): keyof FaultMix | null {
    const mix = this.sim.options.faults;
    const kinds = Object.keys(mix) as (keyof FaultMix)[];
    const total = kinds.reduce((s, k) => s + mix[k], 0);
    if (total <= 0) return null;
    let x = this.random.float() * total;
    let kind: keyof FaultMix = kinds[0] as keyof FaultMix;
    for (const k of kinds) {
      x -= mix[k];
      if (x < 0) {
        kind = k;
        break;
      }
    }
    return kind;
  }

  /** Three to seven partitions of different shapes, 800 ms apart. */
  private rollingPartition(): void {
    const r = this.random;
    const steps = r.range(3, 8);
    for (let i = 0; i < steps; i++) {
      this.sim.scheduler.after(i * 800 * US_PER_MS, Tag.nemesis, () => {
        if (!this.sim.quiet) this.partitionFor(r.range(400 * US_PER_MS, 1_500 * US_PER_MS));
      });
    }
  }

  /** Pauses the leader (or another node) for longer than an election timeout, so the others may elect meanwhile. */
  private pauseOne(): void {
    const r = this.random;
    const leader = this.sim.leader();
    const node = leader && r.chance(this.sim.options.pauseLeaderShare) ? leader : this.pickTarget();
    const [lo, hi] = this.sim.options.pauseMs;
    if (node) this.sim.pause(node, r.range(Math.round(lo * US_PER_MS), Math.round(hi * US_PER_MS)));
  }

  private transferLeadership(): void {
    const leader = this.sim.leader();
    if (!leader?.replica) return;
    const voters = leader.replica.conf.voters.filter((v) => v !== leader.id);
    if (voters.length === 0) return;
    this.sim.stats.transfers++;
    const to = this.random.pick(voters);
    this.sim.guard(leader, () => leader.replica?.transferLeadership(to));
  }

  /** Drops, duplicates and delays far more messages for a while. */
  private lossyNetwork(): void {
    const r = this.random;
    const epoch = ++this.sim.partitionEpoch;
    this.sim.network.profile = { ...this.faulty, dropP: 0.1 + 0.4 * r.float(), duplicateP: 0.1, tailP: 0.1 };
    this.sim.scheduler.after(r.range(1 * US_PER_SECOND, 5 * US_PER_SECOND), Tag.nemesis, () => {
      if (!this.sim.quiet && this.sim.partitionEpoch === epoch) this.sim.network.profile = this.faulty;
    });
  }

  /** Provoke an election by isolating the leader; the first vote granted in it arms the power cut. */
  private armAmnesia(): void {
    const leader = this.sim.leader();
    if (!leader) return;
    this.amnesiaArmed = true;
    const epoch = ++this.sim.partitionEpoch;
    this.sim.stats.partitions++;
    this.sim.network.setCut(
      cutBetween(
        [leader.id],
        this.sim.live().map((n) => n.id),
      ),
    );
    this.sim.scheduler.after(this.random.range(1_500 * US_PER_MS, 3 * US_PER_SECOND), Tag.nemesis, () => {
      this.amnesiaArmed = false;
      if (this.sim.partitionEpoch === epoch) this.sim.network.heal();
    });
  }

  /** One node's disk turns 10 to 100 times slower for a while. */
  private slowDisk(): void {
    const r = this.random;
    const node = r.pick(this.sim.live());
    node.diskSlowFactor = r.range(10, 100);
    this.sim.scheduler.after(r.range(1 * US_PER_SECOND, 5 * US_PER_SECOND), Tag.nemesis, () => {
      node.diskSlowFactor = 1;
    });
  }

  /** The leader half the time (the interesting target), otherwise any up node. */
  private pickTarget(): SimNode | null {
    const leader = this.sim.leader();
    if (leader && this.random.chance(0.5)) return leader;
    const up = this.sim.up();
    return up.length > 0 ? this.random.pick(up) : null;
  }

  private partitionFor(durationUs: number): void {
    const r = this.random;
    const nodes = this.sim.live().map((n) => n.id);
    if (nodes.length < 2) return;
    const shape = r.pick(PARTITION_SHAPES);
    const partition = makePartition(shape, nodes, this.sim.leader()?.id ?? null, r);
    this.sim.stats.partitions++;
    this.sim.note(`partition ${partition.shape} ${partition.describe}`);
    const epoch = ++this.sim.partitionEpoch;
    this.sim.network.setCut(partition.links);
    this.sim.scheduler.after(durationUs, Tag.nemesis, () => {
      if (this.sim.partitionEpoch === epoch) this.sim.network.heal();
    });
  }

  private crashSome(): void {
    const r = this.random;
    const down = this.sim.live().filter((n) => n.state === 'down').length;
    if (down >= this.sim.options.crashedMax) return;
    const node = this.pickTarget();
    if (!node) return;
    if (r.chance(0.15)) {
      // An fsync error: the replica must stop itself (and never retry the fsync).
      node.disk.failNextSync();
      const life = node.life;
      // If nothing fsyncs soon (an idle follower), crash it outright.
      this.sim.scheduler.after(2 * US_PER_SECOND, Tag.nemesis, () => {
        if (node.life === life && !this.sim.quiet) this.sim.crash(node, 'no fsync came', r.range(200 * US_PER_MS, 4 * US_PER_SECOND));
      });
      return;
    }
    this.sim.crash(
      node,
      'power cut',
      r.chance(this.sim.options.restartFastShare) ? r.range(20 * US_PER_MS, 300 * US_PER_MS) : r.range(300 * US_PER_MS, 6 * US_PER_SECOND),
    );
  }

  /** Remove a voter, add a learner, or promote one; one change at a time. */
  private changeMembership(): void {
    const r = this.random;
    const leader = this.sim.leader();
    if (!leader?.replica || this.membershipBusy) return;
    const conf = leader.replica.conf;
    const n = this.sim.options.replicas;
    const learner = conf.learners[0];
    if (learner !== undefined && r.chance(0.8)) {
      return this.proposeChange(leader, { type: ConfChangeType.AddVoter, node: learner });
    }
    const canRemove = conf.voters.length >= n && conf.voters.length > 1;
    const canAdd = conf.voters.length <= n && this.sim.nodes.size < this.nodesMax - 2;
    if (canRemove && (!canAdd || r.chance(0.5))) {
      // The leader itself a fifth of the time: it must step down once its removal commits.
      const others = conf.voters.filter((v) => v !== leader.id);
      const victim = r.chance(0.2) || others.length === 0 ? leader.id : r.pick(others);
      return this.proposeChange(leader, { type: ConfChangeType.RemoveNode, node: victim });
    }
    if (canAdd) {
      const fresh = this.sim.addNode(toNodeId(`n${this.sim.nodes.size + 1}`));
      this.sim.start(fresh);
      // As the cell node's AddMember does: the member's addresses first, then the change.
      this.proposeDirectory(leader, {
        kind: 'SetMemberAddress',
        id: fresh.id,
        address: simAddress(fresh.id),
        peerAddress: simPeerAddress(fresh.id),
      });
      const type = r.chance(0.7) ? ConfChangeType.AddLearner : ConfChangeType.AddVoter;
      return this.proposeChange(leader, { type, node: fresh.id });
    }
  }

  /** A member-directory command (lock machine only); its outcome does not matter to the run, the checkers see it applied. */
  private proposeDirectory(leader: SimNode, command: Command): void {
    const cell = leader.cell;
    if (!cell) return;
    this.sim.note(`${leader.id} proposes ${command.kind}`);
    this.sim.guard(leader, () => cell.propose(command, () => {}));
  }

  private proposeChange(leader: SimNode, change: ConfChange): void {
    const replica = leader.replica;
    if (!replica) return;
    this.membershipBusy = true;
    this.sim.stats.confChanges++;
    this.sim.note(`conf ${change.type} ${change.node}`);
    this.sim.guard(leader, () =>
      replica.proposeConfChange(change, (outcome) => {
        this.membershipBusy = false;
        if (outcome.ok && change.type === ConfChangeType.RemoveNode) {
          if (!replica.stopped && replica.isLeader) this.proposeDirectory(leader, { kind: 'ForgetMember', id: change.node });
          const gone = this.sim.nodes.get(change.node);
          // Let it hear the commit first; then its disk goes away with it.
          if (gone) this.sim.scheduler.after(500 * US_PER_MS, Tag.nemesis, () => this.decommissionIfOut(gone));
        }
      }),
    );
  }

  /**
   * The planted-bug scenario for concurrent membership changes: add two
   * voters back to back, then cut the cell so that the leader and the new
   * voters are a majority of the new configuration and the rest a majority
   * of the old one. With one change at a time the second is refused and
   * the leader's side cannot commit alone.
   */
  private doubleConfChange(): void {
    const r = this.random;
    const leader = this.sim.leader();
    if (!leader?.replica || this.membershipBusy || this.sim.nodes.size >= this.nodesMax - 2) return;
    const voters = leader.replica.conf.voters;
    const n = voters.length;
    const majorityNew = Math.floor((n + 2) / 2) + 1;
    const majorityOld = Math.floor(n / 2) + 1;
    const extra = majorityNew - 3;
    if (extra < 0 || n - 1 - extra < majorityOld) return this.changeMembership();
    const a = this.sim.addNode(toNodeId(`n${this.sim.nodes.size + 1}`));
    const b = this.sim.addNode(toNodeId(`n${this.sim.nodes.size + 1}`));
    this.sim.start(a);
    this.sim.start(b);
    this.proposeChange(leader, { type: ConfChangeType.AddVoter, node: a.id });
    this.membershipBusy = false;
    this.proposeChange(leader, { type: ConfChangeType.AddVoter, node: b.id });
    const others = r.shuffle(voters.filter((v) => v !== leader.id));
    const side = [leader.id, a.id, b.id, ...others.slice(0, extra)];
    const rest = this.sim
      .live()
      .map((x) => x.id)
      .filter((id) => !side.includes(id));
    const epoch = ++this.sim.partitionEpoch;
    this.sim.scheduler.after(r.range(50 * US_PER_MS, 400 * US_PER_MS), Tag.nemesis, () => {
      if (this.sim.quiet || this.sim.partitionEpoch !== epoch) return;
      this.sim.stats.partitions++;
      this.sim.network.setCut(cutBetween(side, rest));
      this.sim.scheduler.after(r.range(3 * US_PER_SECOND, 8 * US_PER_SECOND), Tag.nemesis, () => {
        if (this.sim.partitionEpoch === epoch) this.sim.network.heal();
      });
    });
  }

  private decommissionIfOut(node: SimNode): void {
    const leader = this.sim.leader();
    if (!leader?.replica || node.state === 'removed') return;
    const status = leader.replica.status();
    const inApplied = leader.replica.conf.voters.includes(node.id) || leader.replica.conf.learners.includes(node.id);
    const inLog = status.voters.includes(node.id) || status.learners.includes(node.id);
    if (!inApplied && !inLog) this.sim.decommission(node);
  }

  /** Nodes outside the leader's membership (removed, or joiners whose add failed) are shut down for good. */
  reconcileMembership(): void {
    const leader = this.sim.leader();
    if (!leader?.replica) return;
    for (const node of this.sim.nodes.values()) {
      if (node.state === 'removed' || node === leader) continue;
      const isBootstrap = this.sim.bootstrap.includes(node.id);
      // A joiner gets a while to be added; a bootstrap node out of the membership was removed.
      if (!isBootstrap && this.sim.scheduler.now - node.joinedAtUs < 15 * US_PER_SECOND) continue;
      this.decommissionIfOut(node);
    }
  }
}
