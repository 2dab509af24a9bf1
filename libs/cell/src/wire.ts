/**
 * The request and answer shapes of the cell's request API: the client
 * contract's messages (lockservice.proto) as plain objects, with its enum
 * numbers. The gRPC layer passes them through unchanged, a follower forwards
 * them to the leader unchanged, and the simulator's clients build them the
 * same way, so every path speaks one shape. The enum numbers are the
 * contract's, generated from the proto into @fencer/contract.
 */
import { AcquireStatus, LockMode as ContractLockMode } from '@fencer/contract';
import type { Holder, LockMode, LockState, Waiter } from '@fencer/lock-fsm';

export const WIRE_MODE = ContractLockMode;
export const WIRE_ACQUIRE_STATUS = AcquireStatus;

export interface WireHolder {
  readonly sessionId: string;
  readonly token: number;
  readonly mode: number;
  readonly clientId: string;
}

export interface WireWaiter {
  readonly sessionId: string;
  readonly mode: number;
  readonly requestId: string;
  readonly clientId: string;
}

export interface WireLockState {
  readonly name: string;
  readonly mode: number;
  readonly holders: WireHolder[];
  readonly waiters: WireWaiter[];
  readonly delayed: boolean;
}

export interface OpenSessionRequest {
  readonly namespace: string;
  readonly clientId: string;
  readonly ttlMs: number;
}
export interface OpenSessionResponse {
  readonly sessionId: string;
  readonly ttlMs: number;
}
export interface CloseSessionRequest {
  readonly sessionId: string;
}
export interface CloseSessionResponse {
  readonly released: string[];
}
export interface AcquireRequest {
  readonly sessionId: string;
  readonly name: string;
  readonly mode: number;
  readonly waitMs: number;
  readonly requestId: string;
  readonly lockDelayMs: number;
}
export interface AcquireResponse {
  readonly status: number;
  readonly token: number;
  readonly holders: WireHolder[];
  readonly queuePosition: number;
  readonly revision: number;
}
export interface ReleaseRequest {
  readonly sessionId: string;
  readonly name: string;
  readonly token: number;
}
export interface ReleaseResponse {
  readonly ok: boolean;
}
export interface CheckTokenRequest {
  readonly name: string;
  readonly token: number;
}
export interface CheckTokenResponse {
  readonly current: boolean;
  readonly latestToken: number;
  readonly revision: number;
}
export interface GetLockRequest {
  readonly name: string;
}
export interface GetLockResponse {
  readonly lock: WireLockState | undefined;
  readonly revision: number;
}
export interface ListLocksRequest {
  readonly prefix: string;
  readonly limit: number;
  readonly pageToken: string;
}
export interface ListLocksResponse {
  readonly locks: WireLockState[];
  readonly nextPageToken: string;
  readonly revision: number;
}
export interface HeartbeatAnswer {
  readonly sessionId: string;
  readonly ttlMsRemaining: number;
  readonly expired: boolean;
}

/** Every unary call of the request API: what a follower forwards to the leader. */
export interface CellCalls {
  openSession: { request: OpenSessionRequest; response: OpenSessionResponse };
  closeSession: { request: CloseSessionRequest; response: CloseSessionResponse };
  acquire: { request: AcquireRequest; response: AcquireResponse };
  release: { request: ReleaseRequest; response: ReleaseResponse };
  checkToken: { request: CheckTokenRequest; response: CheckTokenResponse };
  getLock: { request: GetLockRequest; response: GetLockResponse };
  listLocks: { request: ListLocksRequest; response: ListLocksResponse };
}
export type CellMethod = keyof CellCalls;
export type RequestOf<M extends CellMethod> = CellCalls[M]['request'];
export type ResponseOf<M extends CellMethod> = CellCalls[M]['response'];

export function modeToWire(mode: LockMode | null): number {
  if (mode === 'EXCLUSIVE') return WIRE_MODE.EXCLUSIVE;
  if (mode === 'SHARED') return WIRE_MODE.SHARED;
  return WIRE_MODE.UNSPECIFIED;
}

/** The contract's mode, or undefined for a number outside the enum (INVALID_MODE). UNSPECIFIED is EXCLUSIVE. */
export function modeFromWire(mode: number): LockMode | undefined {
  if (mode === WIRE_MODE.UNSPECIFIED || mode === WIRE_MODE.EXCLUSIVE) return 'EXCLUSIVE';
  if (mode === WIRE_MODE.SHARED) return 'SHARED';
  return undefined;
}

export function holderToWire(h: Holder): WireHolder {
  return { sessionId: h.sessionId, token: h.token, mode: modeToWire(h.mode), clientId: h.clientId };
}

export function waiterToWire(w: Waiter): WireWaiter {
  return { sessionId: w.sessionId, mode: modeToWire(w.mode), requestId: w.requestId, clientId: w.clientId };
}

export function lockToWire(lock: LockState): WireLockState {
  return {
    name: lock.name,
    mode: modeToWire(lock.mode),
    holders: lock.holders.map(holderToWire),
    waiters: lock.waiters.map(waiterToWire),
    delayed: lock.delayed,
  };
}
