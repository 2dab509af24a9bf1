/**
 * @fencer/contract: what the client contract (proto/lockservice/v1) fixes,
 * in one pure place under everything that needs it: the lock-name grammar
 * and its limits, id formats, the wire enum numbers (generated from the
 * protos, never copied), and the routing table's schema.
 *
 * Pure: imports only @fencer/base; no node: module, clock or I/O.
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
