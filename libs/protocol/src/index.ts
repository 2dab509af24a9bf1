export * as lockservice from './gen/lockservice/v1/lockservice.js';
export * as raftpb from './gen/fencer/raft/v1/raft.js';
export * as adminpb from './gen/fencer/admin/v1/admin.js';
export * as internalpb from './gen/fencer/internal/v1/heartbeat.js';
export {
  ERROR_DETAILS_CHARS_MAX,
  ERROR_TABLE,
  boundedDetails,
  FORWARDED_KEY,
  LEADER_HINT_KEY,
  RETRY_AFTER_MS_KEY,
  ROUTE_LEADER_KEY,
  ROUTE_WANTED_KEY,
  LOCK_REASON_KEY,
  fromServiceError,
  isRetryable,
  toServiceError,
  type ErrorSpec,
} from './errors.js';
export { TolerantServer } from './tolerant-server.js';
