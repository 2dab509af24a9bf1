/**
 * The fixed bounds of the client contract (proto/lockservice/v1), in one
 * place (CONTRIBUTING.md, "Limits"). Every layer checks input against these: the
 * client before it calls, the router and the cell node where a call arrives,
 * the state machine again on apply. They are not tuning knobs: changing one
 * changes what a valid request is, for every client and every replica.
 *
 * The state machine's counting limits (sessions, locks, waiters per cell)
 * are part of its replicated semantics and live in @fencer/lock-fsm.
 */
import { assert } from '@fencer/base';

/** The contract's header: a lock name is at most 512 bytes in all. */
export const NAME_BYTES_MAX = 512;
/** A namespace is one path segment of at most this many bytes (the grammar in names.ts). */
export const NAMESPACE_BYTES_MAX = 64;
/** Request ids are client-chosen; a UUID is 36 bytes, so 128 leaves room for prefixes. */
export const REQUEST_ID_BYTES_MAX = 128;
/** Client ids name a process for operators ("billing-worker-7"). */
export const CLIENT_ID_BYTES_MAX = 256;
/** `<namespace>:<unique>`: a 64-byte namespace plus a generous unique part. */
export const SESSION_ID_BYTES_MAX = 192;
/** Member ids name a replica of a cell ("cell-1-r3"): one path segment, so they fit log lines and metric labels. */
export const MEMBER_ID_BYTES_MAX = 128;
/** The contract: lock_delay_ms is capped by the server, default cap 60000. */
export const LOCK_DELAY_MS_MAX = 60_000;
/** TTL bounds the state machine accepts; the server clamps requests to its own, narrower policy first. */
export const TTL_MS_MIN = 1;
export const TTL_MS_MAX = 86_400_000;
/** wait_ms is recorded for the leader's deadline tracker only; bound it so it stays a safe integer in every encoding. */
export const WAIT_MS_MAX = 2 ** 48;
/** The contract: ListLocks limit 0 means the server default (1000). */
export const LIST_LOCKS_LIMIT_DEFAULT = 1000;
/** A larger ListLocks limit is served as this many: a page is one answer message. */
export const LIST_LOCKS_LIMIT_MAX = 1000;

assert(NAMESPACE_BYTES_MAX + 5 < NAME_BYTES_MAX, 'a name must have room for "/ls/<namespace>/" and one segment');
assert(NAMESPACE_BYTES_MAX + 1 < SESSION_ID_BYTES_MAX, 'a session id must have room for "<namespace>:" and a unique part');
assert(LIST_LOCKS_LIMIT_DEFAULT <= LIST_LOCKS_LIMIT_MAX, 'the default page fits the maximum');
assert(TTL_MS_MIN >= 1 && TTL_MS_MIN <= TTL_MS_MAX, 'TTL range is not empty');
assert(Number.isSafeInteger(WAIT_MS_MAX) && LOCK_DELAY_MS_MAX < WAIT_MS_MAX, 'waits and delays stay safe integers');
