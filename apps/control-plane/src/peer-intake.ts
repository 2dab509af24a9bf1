/**
 * Which senders the meta group's peer port takes Raft messages from: the
 * cell nodes' rule (@fencer/peer-transport admitsSender) over the meta group's
 * own view. Without it a well-formed RaftBatch from any host that reaches
 * the peer port, with a made-up sender at a higher term, moves the meta
 * group's term (the core takes requests from non-members, dissertation
 * §4.1), so any host could start elections at will.
 */
import { NodeId } from '@fencer/base';
import { type PeerIntake, admitsSender } from '@fencer/peer-transport';
import type { MetaGroup } from '@fencer/meta-fsm/group';

/**
 * The peer server's checks for this instance's meta group. Known members:
 * the configured peers (--peers), the applied configuration (voters and
 * learners) and the group's member directory; the leader it follows is
 * taken too, and while it follows none, anyone is (see admitsSender).
 * `onRefused` counts each refusal by reason.
 */
export function metaPeerChecks(
  group: Pick<MetaGroup, 'core' | 'leader'>,
  configuredPeers: ReadonlyMap<NodeId, string>,
  onRefused: NonNullable<PeerIntake['onRefused']>,
): Pick<PeerIntake, 'admits' | 'onRefused'> {
  const isKnown = (id: string): boolean => {
    const member = NodeId(id);
    const conf = group.core.replica.conf;
    return (
      configuredPeers.has(member) ||
      conf.voters.includes(member) ||
      conf.learners.includes(member) ||
      group.core.members.addresses.has(member)
    );
  };
  return { admits: (id) => admitsSender(id, { isKnown, leader: group.leader }), onRefused };
}
