export * from './types.js';
export * from './api.js';
export { createRaftNode } from './raw-node.js';
export { checkMessage, DropReason } from './message-check.js';
export { MemoryStorage } from './memory-storage.js';
export { encodeConfChange, decodeConfChange, applyConfChange, confStatesEqual } from './conf-change.js';
export { defaultRaftConfig, raftTuning, raftTuningDefault, validateRaftConfig, type RaftConfigInput } from './config.js';
export * as raftLimits from './limits.js';
