/**
 * Held-open Acquire calls on the leader, keyed by (session, request id).
 * A call registers before it proposes, so a grant or cancellation applied in
 * the same batch as its queueing (before the proposal's own answer arrives)
 * still reaches it. Resolved from the apply stream; answered QUEUED when
 * this node stops leading, so the client retries at the new leader with
 * the same request id. Callbacks, not promises: the simulator runs the
 * same code synchronously on virtual time.
 */
import type { RequestId, Revision, SessionId } from '@fencer/base';

export type WaitResult =
  | { readonly kind: 'granted'; readonly token: Revision; readonly revision: Revision }
  | { readonly kind: 'cancelled'; readonly revision: Revision }
  | { readonly kind: 'session-gone' }
  | { readonly kind: 'leadership-lost' }
  | { readonly kind: 'gave-up' };

export interface WaitHandle {
  /** Settled already (the result is known and was delivered). */
  settled(): boolean;
  /** Ends the call with 'gave-up' unless it has a result already. */
  cancel(): void;
}

interface Entry {
  settled: boolean;
  resolve(r: WaitResult): void;
}

const key = (sessionId: string, requestId: string): string => `${sessionId}\u0000${requestId}`;

export class WaitingCalls {
  private readonly calls = new Map<string, Set<Entry>>();
  private total = 0;

  constructor(private readonly max: number) {}

  get size(): number {
    return this.total;
  }

  /** Registers a call answered once through `answer`; undefined when the node already holds `max` calls open. */
  register(sessionId: SessionId, requestId: RequestId, answer: (r: WaitResult) => void): WaitHandle | undefined {
    if (this.total >= this.max) return undefined;
    const k = key(sessionId, requestId);
    const entry: Entry = {
      settled: false,
      resolve: (r) => {
        if (entry.settled) return;
        entry.settled = true;
        this.remove(k, entry);
        answer(r);
      },
    };
    let set = this.calls.get(k);
    if (!set) this.calls.set(k, (set = new Set()));
    set.add(entry);
    this.total++;
    return { settled: () => entry.settled, cancel: () => entry.resolve({ kind: 'gave-up' }) };
  }

  resolve(sessionId: SessionId, requestId: RequestId, r: WaitResult): void {
    const set = this.calls.get(key(sessionId, requestId));
    if (!set) return;
    for (const e of [...set]) e.resolve(r);
  }

  /** Every call ends (this node stopped leading, or it is shutting down). */
  resolveAll(r: WaitResult): void {
    for (const set of [...this.calls.values()]) for (const e of [...set]) e.resolve(r);
  }

  private remove(k: string, e: Entry): void {
    const set = this.calls.get(k);
    if (!set || !set.delete(e)) return;
    this.total--;
    if (set.size === 0) this.calls.delete(k);
  }
}
