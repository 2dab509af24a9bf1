/**
 * The state machine's shapes as the contract's messages, for the fake
 * LockService: what a cell node's gRPC layer does with the same values.
 */
import type { Holder, LockEvent, LockEventType, LockMode, LockState, Waiter } from '@fencer/lock-fsm';
import { lockservice } from '@fencer/protocol';

const { LockMode: PbMode, WatchEventType: PbEvent } = lockservice;

const EVENT_TYPES: { readonly [T in LockEventType]: lockservice.WatchEventType } = {
  ACQUIRED: PbEvent.WATCH_EVENT_TYPE_ACQUIRED,
  RELEASED: PbEvent.WATCH_EVENT_TYPE_RELEASED,
  EXPIRED: PbEvent.WATCH_EVENT_TYPE_EXPIRED,
  QUEUED: PbEvent.WATCH_EVENT_TYPE_QUEUED,
  CANCELED: PbEvent.WATCH_EVENT_TYPE_CANCELED,
};

/** The contract's mode number; a free lock has mode UNSPECIFIED. */
export function modeToPb(mode: LockMode | null): lockservice.LockMode {
  if (mode === null) return PbMode.LOCK_MODE_UNSPECIFIED;
  return mode === 'SHARED' ? PbMode.LOCK_MODE_SHARED : PbMode.LOCK_MODE_EXCLUSIVE;
}

/** UNSPECIFIED is treated as EXCLUSIVE (the contract's comment); a number outside the enum is no mode. */
export function modeFromPb(mode: number): LockMode | undefined {
  if (mode === PbMode.LOCK_MODE_UNSPECIFIED || mode === PbMode.LOCK_MODE_EXCLUSIVE) return 'EXCLUSIVE';
  return mode === PbMode.LOCK_MODE_SHARED ? 'SHARED' : undefined;
}

export function holderToPb(h: Holder): lockservice.Holder {
  return { sessionId: h.sessionId, token: h.token, mode: modeToPb(h.mode), clientId: h.clientId };
}

export function waiterToPb(w: Waiter): lockservice.Waiter {
  return { sessionId: w.sessionId, mode: modeToPb(w.mode), requestId: w.requestId, clientId: w.clientId };
}

export function stateToPb(s: LockState): lockservice.LockState {
  return {
    name: s.name,
    mode: modeToPb(s.mode),
    holders: s.holders.map(holderToPb),
    waiters: s.waiters.map(waiterToPb),
    delayed: s.delayed,
  };
}

export function eventToPb(e: LockEvent): lockservice.WatchEvent {
  return { revision: e.revision, type: EVENT_TYPES[e.type], name: e.name, sessionId: e.sessionId, token: e.token, lock: stateToPb(e.lock) };
}

/** A SNAPSHOT (one live lock at the stream's start) or PROGRESS (nothing more up to `revision`) event. */
export function serverEvent(revision: number, lock: LockState | undefined): lockservice.WatchEvent {
  return lock === undefined
    ? { revision, type: PbEvent.WATCH_EVENT_TYPE_PROGRESS, name: '', sessionId: '', token: 0, lock: undefined }
    : { revision, type: PbEvent.WATCH_EVENT_TYPE_SNAPSHOT, name: lock.name, sessionId: '', token: 0, lock: stateToPb(lock) };
}
