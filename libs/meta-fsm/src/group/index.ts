/**
 * @fencer/meta-fsm/group: the meta state machine as a member of its Raft
 * group, on @fencer/group's GroupCore. Separate from the package's main entry
 * so the state machine itself keeps importing only @fencer/base; this entry
 * adds the pure group libraries (group, replica, wal's types), never a clock,
 * timer or socket of its own, and nothing of the lock cell's. The control
 * plane and the simulator both run it.
 */
export { MetaGroup, isNotLeader, type MetaGroupConfig, type MetaGroupEnv } from './meta-group.js';
export { META_READS_WAITING_MAX, META_ROUTING_WAITERS_MAX } from './limits.js';
