export * from './raft-log-store.js';
