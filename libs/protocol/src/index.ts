export * as lockservice from './gen/lockservice/v1/lockservice.js';
export * as raftpb from './gen/fencer/raft/v1/raft.js';
export * as adminpb from './gen/fencer/admin/v1/admin.js';
export * as internalpb from './gen/fencer/internal/v1/heartbeat.js';
export {
  ERROR_TABLE,
  FORWARDED_KEY,
  LEADER_HINT_KEY,
  LOCK_REASON_KEY,
  fromServiceError,
  isRetryable,
  toServiceError,
  type ErrorSpec,
} from './errors.js';
export { TolerantServer } from './tolerant-server.js';
export {
  LANE_CALLS_MAX,
  LANE_FRAME_MAX,
  LANE_MAGIC,
  LANE_METHODS,
  type LaneDispatch,
  type LaneMethod,
  type LaneOutcome,
  type MuxOptions,
  type MuxedPort,
  listenMuxed,
} from './lane.js';
export { LaneClient, type LaneResult, UNSUPPORTED_RETRY_MS } from './lane-client.js';
