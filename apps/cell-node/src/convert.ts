/** The lock state machine's values ↔ the contract's messages. */
import type { Holder, LockMode, LockState, Waiter } from '@fencer/lock-fsm';
import { lockservice } from '@fencer/protocol';

const { LockMode: PbMode } = lockservice;

export function modeToPb(mode: LockMode | null): lockservice.LockMode {
  if (mode === 'EXCLUSIVE') return PbMode.LOCK_MODE_EXCLUSIVE;
  if (mode === 'SHARED') return PbMode.LOCK_MODE_SHARED;
  return PbMode.LOCK_MODE_UNSPECIFIED;
}

/** The contract's mode, or undefined for a number outside the enum (INVALID_MODE). UNSPECIFIED is EXCLUSIVE. */
export function modeFromPb(mode: number): LockMode | undefined {
  if (mode === PbMode.LOCK_MODE_UNSPECIFIED || mode === PbMode.LOCK_MODE_EXCLUSIVE) return 'EXCLUSIVE';
  if (mode === PbMode.LOCK_MODE_SHARED) return 'SHARED';
  return undefined;
}

export function holderToPb(h: Holder): lockservice.Holder {
  return { sessionId: h.sessionId, token: h.token, mode: modeToPb(h.mode), clientId: h.clientId };
}

export function waiterToPb(w: Waiter): lockservice.Waiter {
  return { sessionId: w.sessionId, mode: modeToPb(w.mode), requestId: w.requestId, clientId: w.clientId };
}

export function lockToPb(lock: LockState): lockservice.LockState {
  return {
    name: lock.name,
    mode: modeToPb(lock.mode),
    holders: lock.holders.map(holderToPb),
    waiters: lock.waiters.map(waiterToPb),
    delayed: lock.delayed,
  };
}
