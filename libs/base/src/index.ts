export { AssertionError, assert, assertEqual, assertUint, unreachable } from './assert.js';
export { type Brand, Term, LogIndex, Revision, NodeId, SessionId, RequestId, Namespace, CellId } from './ids.js';
export { type Clock, ManualClock } from './clock.js';
export { type Random, SeededRandom } from './random.js';
export { type Result, ok, err } from './result.js';
export { BoundedQueue } from './bounded-queue.js';
export { ErrorCode, ERROR_CODES, FencerError } from './errors.js';
export { findForbiddenTokens, findForeignImports, FORBIDDEN_IN_PURE_CODE, type ForbiddenHit } from './purity.js';
