/**
 * Connection resets (docs/decisions/0021-crash-detection-by-the-transport.md):
 * a node's transport sees its connection to a peer closed or reset, and
 * reports it to the replica as an input. Two causes are simulated: a process
 * that crashes (the kernel closes its sockets, so every node still connected
 * to it sees a reset within a millisecond; a machine that stops dead closes
 * nothing), and a spurious reset between two live nodes (a middlebox, a
 * refused batch), which the nemesis injects.
 *
 * The checker here ('leader-disrupted') holds the fast path to its promise:
 * a spurious reset never deposes a live leader. A reset is watched only in a
 * calm cell (no cut link, lossy network, slow disk, paused or down node, and
 * no other fault for a while before it or during the watch); a real election
 * (a candidate of a later term) within the watch is a violation.
 */
import type { NodeId, Random } from '@fencer/base';
import type { Role } from '@fencer/raft';
import type { SimNode } from './sim-node.js';
import type { Simulation } from './simulation.js';
import { Tag } from './tags.js';
import { US_PER_MS, US_PER_SECOND } from './time.js';

/** A reset reaches the other end within this long (the kernel answers at once; this is the wire). */
const resetDelayUsMax = 1 * US_PER_MS;
/** No other fault for this long before a reset is watched: longer than any fault lasts, plus an election. */
const calmBeforeUs = 8 * US_PER_SECOND;
/** How long after a spurious reset an election counts as caused by it (well past the election timeout). */
const watchUs = 3 * US_PER_SECOND;

interface Watch {
  readonly leader: NodeId;
  readonly follower: NodeId;
  readonly term: number;
  readonly untilUs: number;
}

export class ConnectionResets {
  /** When the nemesis last did anything but a spurious reset (a watch needs calm before and during it). */
  private otherFaultUs = 0;
  private lastResetUs = -Infinity;
  private watch: Watch | null = null;

  constructor(
    private readonly sim: Simulation,
    private readonly random: Random,
  ) {}

  /** The nemesis did something other than a spurious reset: any election in the next while has another cause. */
  otherFault(): void {
    this.otherFaultUs = this.sim.scheduler.now;
    this.watch = null;
  }

  /** `node` crashed: as a process that dies (share crashResetShare), its live peers' connections to it reset. */
  crashed(node: SimNode): void {
    this.otherFault();
    if (!this.random.chance(this.sim.options.crashResetShare)) return;
    for (const peer of this.sim.up()) {
      if (peer !== node && !this.sim.network.isCut(node.id, peer.id)) this.report(peer, node.id);
    }
  }

  /** A spurious reset of one follower's connection to the live leader; watched when the cell is calm. */
  spurious(): void {
    const leader = this.sim.leader();
    if (!leader?.replica) return;
    const followers = this.sim.up().filter((n) => n !== leader && n.replica?.leader === leader.id);
    if (followers.length === 0) return;
    const follower = this.random.pick(followers);
    const now = this.sim.scheduler.now;
    this.sim.note(`reset ${follower.id} > ${leader.id}`);
    if (this.calm(now))
      this.watch = { leader: leader.id, follower: follower.id, term: leader.replica.status().term, untilUs: now + watchUs };
    this.lastResetUs = now;
    this.report(follower, leader.id);
  }

  /** A node's role changed: a real election in a watched window is the violation. */
  roleChanged(node: SimNode, role: Role, term: number): void {
    const w = this.watch;
    if (w === null) return;
    if (this.sim.scheduler.now > w.untilUs) {
      this.watch = null;
      return;
    }
    if (role !== 'candidate' || term <= w.term) return;
    this.watch = null;
    this.sim.checkers.fail(
      'leader-disrupted',
      `${node.id} campaigned at term ${term} ${((this.sim.scheduler.now - (w.untilUs - watchUs)) / US_PER_MS).toFixed(1)} ms after ` +
        `${w.follower}'s connection to ${w.leader}, the live leader of term ${w.term}, was reset in a calm cell`,
    );
  }

  private calm(now: number): boolean {
    const sim = this.sim;
    if (now - this.otherFaultUs < calmBeforeUs || now - this.lastResetUs < watchUs) return false;
    if (sim.network.cutLinks > 0 || sim.network.profile !== sim.nemesis.faulty) return false;
    return sim.live().every((n) => n.state === 'up' && now >= n.pausedUntilUs && n.diskSlowFactor === 1);
  }

  private report(node: SimNode, peer: NodeId): void {
    this.sim.stats.connectionResets++;
    const life = node.life;
    this.sim.scheduler.after(1 + this.random.int(resetDelayUsMax), Tag.nemesis | (node.num << 8), () =>
      this.sim.onNode(node, life, () => node.replica?.reportConnectionLost(peer)),
    );
  }
}
