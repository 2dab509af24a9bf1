export * from './types.js';
export * from './api.js';
export { createRaftNode } from './raw-node.js';
export { MemoryStorage } from './memory-storage.js';
export { encodeConfChange, decodeConfChange, applyConfChange, confStatesEqual } from './conf-change.js';
export {
  defaultRaftConfig,
  validateRaftConfig,
  type RaftConfigInput,
  DEFAULT_ELECTION_TICKS,
  DEFAULT_HEARTBEAT_TICKS,
  DEFAULT_MAX_ENTRIES_PER_MSG,
  DEFAULT_MAX_BYTES_PER_MSG,
  DEFAULT_MAX_INFLIGHT_MSGS,
  DEFAULT_SNAPSHOT_CHUNK_BYTES,
} from './config.js';
export * as raftLimits from './limits.js';
