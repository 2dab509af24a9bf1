/**
 * @fencer/contract: what the client contract (proto/lockservice/v1) fixes,
 * in one pure place under everything that needs it: the lock-name grammar
 * and its limits, id formats, the wire enum numbers (generated from the
 * protos, never copied), and the routing table's schema.
 *
 * Pure: imports only @fencer/base; no node: module, clock or I/O, no Buffer
 * or TextEncoder (byte lengths are counted by utf8ByteLength).
 *
 * The branded id types (Namespace, SessionId, RequestId, ...) stay in
 * @fencer/base: they are type-level vocabulary that libs beside the contract
 * (raft, wal, replica, cell) share without needing any of its rules, and
 * base must depend on nothing. The contract gives them their formats here.
 */

// The routing table: its schema, its one parser and writer, and the one placement rule for a new tenant.
export {
  CELLS_MAX,
  EMPTY_TABLE,
  REPLICAS_PER_CELL_MAX,
  ROUTES_MAX,
  RoutingFormatError,
  isCellId,
  isHostPort,
  leastLoadedCell,
  namespacesPerCell,
  parseCells,
  parseRoutes,
  parseRoutingFile,
  routingFileJson,
  routingObject,
  type CellAddresses,
  type CellLoad,
  type Route,
  type RouteState,
  type RoutingFileObject,
  type RoutingObject,
  type RoutingTable,
} from './routing-table.js';

// ---- lock names, ids, limits and wire enums ----
export {
  LOCK_NAME_ROOT,
  checkNamespace,
  isLockNameIn,
  isValidNamespace,
  parseLockName,
  parseLockPrefix,
  validateLockName,
  type ContractProblem,
  type LockNameProblem,
  type ParsedLockName,
  type ParsedLockPrefix,
} from './names.js';
export {
  SESSION_ID_SEPARATOR,
  checkClientId,
  checkMemberId,
  checkRequestId,
  checkSessionId,
  makeSessionId,
  namespaceOfSessionId,
} from './ids.js';
export {
  CLIENT_ID_BYTES_MAX,
  LIST_LOCKS_LIMIT_DEFAULT,
  LIST_LOCKS_LIMIT_MAX,
  LOCK_DELAY_MS_MAX,
  MEMBER_ID_BYTES_MAX,
  NAME_BYTES_MAX,
  NAMESPACE_BYTES_MAX,
  REQUEST_ID_BYTES_MAX,
  SESSION_ID_BYTES_MAX,
  TTL_MS_MAX,
  TTL_MS_MIN,
  WAIT_MS_MAX,
} from './limits.js';
export { utf8ByteLength } from './utf8.js';
export { AcquireStatus, LockMode, WatchEventType } from './gen/wire-enums.js';

// How a call presents its tenant token, and the refusals every checker answers.
export { TOKEN_CHARS_MAX, bearerOf, forbidden, missingToken } from './credentials.js';
