/**
 * @fencer/contract: what the client contract (proto/lockservice/v1) fixes,
 * in one pure place under everything that needs it: the lock-name grammar
 * and its limits, id formats, the wire enum numbers (generated from the
 * protos, never copied), and the routing table's schema.
 *
 * Pure: imports only @fencer/base; no node: module, clock or I/O.
 */
export {};
