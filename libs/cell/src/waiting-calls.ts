/**
 * Held-open Acquire calls on the leader, keyed by (session, request id): the
 * registry the apply stream resolves them through. A call registers before
 * it proposes, so a grant or cancellation applied in the same batch as its
 * queueing (before the proposal's own answer arrives) still reaches it.
 * When this node stops leading every call gets 'leadership-lost' (its
 * caller is answered QUEUED and retries at the new leader with the same
 * request id). A call answered another way withdraws its registration. The registry
 * answers no one itself: it hands each call its result, once, and the call
 * (held-acquire.ts) answers its caller. Callbacks, not promises: the
 * simulator runs the same code synchronously on virtual time.
 */
import { type RequestId, type Revision, type SessionId, assert } from '@fencer/base';
import { namespaceOfSessionId } from '@fencer/contract';

/** What the log or the leadership decided for a held call. */
export type WaitResult =
  | { readonly kind: 'granted'; readonly token: Revision; readonly revision: Revision }
  | { readonly kind: 'cancelled'; readonly revision: Revision }
  | { readonly kind: 'session-gone' }
  | { readonly kind: 'leadership-lost' }
  /** Its namespace froze for a move: the caller retries, and finds the wait on whichever cell then holds it. */
  | { readonly kind: 'namespace-moving' };

export interface WaitHandle {
  /** Resolved already (its result was handed over) or withdrawn. */
  settled(): boolean;
  /** Leaves the registry without a result (the call was answered another way); harmless once settled. */
  withdraw(): void;
}

interface Registration {
  /** Resolved or withdrawn: never handed a result again. */
  settled: boolean;
  readonly resolved: (r: WaitResult) => void;
}

const key = (sessionId: string, requestId: string): string => `${sessionId}\u0000${requestId}`;

export class WaitingCalls {
  private readonly calls = new Map<string, Set<Registration>>();
  /** Registrations not yet settled, over every key; never above `max`. */
  private total = 0;

  constructor(private readonly max: number) {}

  get size(): number {
    return this.total;
  }

  /** Registers a call handed its result once through `resolved`; undefined when the node already holds `max` calls open. */
  register(sessionId: SessionId, requestId: RequestId, resolved: (r: WaitResult) => void): WaitHandle | undefined {
    if (this.total >= this.max) return undefined;
    const k = key(sessionId, requestId);
    const registration: Registration = { settled: false, resolved };
    let set = this.calls.get(k);
    if (!set) this.calls.set(k, (set = new Set()));
    set.add(registration);
    this.total++;
    return { settled: () => registration.settled, withdraw: () => this.settle(k, registration) };
  }

  resolve(sessionId: SessionId, requestId: RequestId, r: WaitResult): void {
    const k = key(sessionId, requestId);
    const set = this.calls.get(k);
    if (!set) return;
    for (const registration of [...set]) this.hand(k, registration, r);
  }

  /** Every call of a session of `namespace` ends with `r` (the namespace froze). */
  resolveNamespace(namespace: string, r: WaitResult): void {
    for (const [k, set] of [...this.calls]) {
      if (namespaceOfSessionId(k.slice(0, k.indexOf('\u0000'))) !== namespace) continue;
      for (const registration of [...set]) this.hand(k, registration, r);
    }
  }

  /** Every call ends (this node stopped leading, or it is shutting down). */
  resolveAll(r: WaitResult): void {
    for (const [k, set] of [...this.calls]) for (const registration of [...set]) this.hand(k, registration, r);
  }

  private hand(k: string, registration: Registration, r: WaitResult): void {
    // A result handed to an earlier call may have withdrawn this one (its caller gave up meanwhile).
    if (registration.settled) return;
    this.settle(k, registration);
    registration.resolved(r);
  }

  private settle(k: string, registration: Registration): void {
    if (registration.settled) return;
    registration.settled = true;
    const set = this.calls.get(k);
    assert(set !== undefined && set.delete(registration), 'an unsettled registration is in the registry under its key');
    this.total--;
    assert(this.total >= 0, 'the registry counts each registration once');
    if (set.size === 0) this.calls.delete(k);
  }
}
