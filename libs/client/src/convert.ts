/** Conversions between the generated protocol messages and the client's public shapes. */
import { lockservice } from '@fencer/protocol';
import type { HolderInfo, LockInfo, LockMode, WaiterInfo, WatchEventInfo, WatchEventType } from './types.js';

const { LockMode: PbMode, WatchEventType: PbType } = lockservice;

export function modeToPb(mode: LockMode): lockservice.LockMode {
  return mode === 'shared' ? PbMode.LOCK_MODE_SHARED : PbMode.LOCK_MODE_EXCLUSIVE;
}

/** UNSPECIFIED is treated as EXCLUSIVE by the contract. */
export function modeFromPb(mode: lockservice.LockMode): LockMode {
  return mode === PbMode.LOCK_MODE_SHARED ? 'shared' : 'exclusive';
}

export function holderFromPb(h: lockservice.Holder): HolderInfo {
  return { sessionId: h.sessionId, token: h.token, mode: modeFromPb(h.mode), clientId: h.clientId };
}

export function waiterFromPb(w: lockservice.Waiter): WaiterInfo {
  return { sessionId: w.sessionId, mode: modeFromPb(w.mode), requestId: w.requestId, clientId: w.clientId };
}

export function lockFromPb(l: lockservice.LockState | undefined, name = ''): LockInfo {
  if (!l) return { name, mode: 'free', holders: [], waiters: [], delayed: false };
  const holders = l.holders.map(holderFromPb);
  return {
    name: l.name || name,
    mode: holders.length === 0 ? 'free' : modeFromPb(l.mode),
    holders,
    waiters: l.waiters.map(waiterFromPb),
    delayed: l.delayed,
  };
}

const TYPES: Partial<Record<lockservice.WatchEventType, WatchEventType>> = {
  [PbType.WATCH_EVENT_TYPE_SNAPSHOT]: 'snapshot',
  [PbType.WATCH_EVENT_TYPE_ACQUIRED]: 'acquired',
  [PbType.WATCH_EVENT_TYPE_RELEASED]: 'released',
  [PbType.WATCH_EVENT_TYPE_EXPIRED]: 'expired',
  [PbType.WATCH_EVENT_TYPE_QUEUED]: 'queued',
  [PbType.WATCH_EVENT_TYPE_CANCELED]: 'canceled',
  [PbType.WATCH_EVENT_TYPE_PROGRESS]: 'progress',
};

/** A watch event in the client's shape, or undefined for a type this client does not know (skipped). */
export function watchEventFromPb(e: lockservice.WatchEvent): WatchEventInfo | undefined {
  const type = TYPES[e.type];
  if (!type) return undefined;
  const base = { type, revision: e.revision, name: e.name, sessionId: e.sessionId, token: e.token };
  return e.lock ? { ...base, lock: lockFromPb(e.lock, e.name) } : base;
}
