export { FencerClient, type AcquireOptions, type ClientEvents, type FencerClientOptions } from './client.js';
export { LockHandle } from './lock-handle.js';
export { Session, type SessionEvents } from './session.js';
export { LockLostError, LockTimeoutError, type LockLostReason } from './errors.js';
export { fencedUpdate, FencedResource, FencedOffError, type FencedUpdateOptions, type SqlStatement } from './fencing.js';
export { parseDuration, formatDuration, DURATION_MS_MAX } from './duration.js';
export { systemScheduler, type Scheduler, type TimerHandle } from './scheduler.js';
export { Lease, type LeaseConfig, type LeaseTransition } from './lease.js';
export { CLIENT_DEFAULTS, CLIENT_LIMITS, DRIFT_PPM_MIN, leaseMarginMs, heartbeatIntervalMs, heartbeatTimeoutMs } from './limits.js';
export { checkAddress } from './endpoints.js';
export { backoffMs, toFencerError } from './retry.js';
export type { KeepAliveObserver } from './keepalive.js';
export type { WatchOptions } from './watch.js';
export type {
  HolderInfo,
  LockInfo,
  LockMode,
  LockPage,
  LockReadResult,
  SessionState,
  TokenCheck,
  WaiterInfo,
  WatchEventInfo,
  WatchEventType,
} from './types.js';
// What the API above names from the workspace's own libraries: the published package is a bundle
// (tools/packages), and it can name only types it exports. Errors the client throws are FencerErrors
// (their `code` says what went wrong); a KeepAliveObserver sees the wire's answers.
export { FencerError, type ErrorCode } from '@fencer/base';
export type { lockservice } from '@fencer/protocol';
