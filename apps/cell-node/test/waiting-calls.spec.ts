/**
 * Goal: held-open Acquire calls get exactly one answer: from the apply
 * stream when it decides them (even before the proposal's own answer), or
 * QUEUED when leadership moves; the node's limit holds.
 * Method: drive WaitingCalls directly.
 */
import { describe, expect, it } from 'vitest';
import { RequestId, Revision, SessionId } from '@fencer/base';
import { WaitingCalls } from '../src/waiting-calls.js';

const s = SessionId('ns:1');
const r = RequestId('req');

describe('WaitingCalls', () => {
  it('delivers a grant that is applied before anyone awaits the handle', async () => {
    const w = new WaitingCalls(10);
    const h = w.register(s, r)!;
    w.resolve(s, r, { kind: 'granted', token: Revision(9), revision: Revision(9) });
    expect(h.settled()).toBe(true);
    await expect(h.result).resolves.toEqual({ kind: 'granted', token: 9, revision: 9 });
    expect(w.size).toBe(0);
  });

  it('answers every call once, the first result winning', async () => {
    const w = new WaitingCalls(10);
    const a = w.register(s, r)!;
    const b = w.register(s, r)!;
    w.resolveAll({ kind: 'leadership-lost' });
    w.resolve(s, r, { kind: 'cancelled', revision: Revision(3) });
    await expect(a.result).resolves.toEqual({ kind: 'leadership-lost' });
    await expect(b.result).resolves.toEqual({ kind: 'leadership-lost' });
  });

  it('refuses registrations beyond its limit until a call ends', () => {
    const w = new WaitingCalls(1);
    const a = w.register(s, r)!;
    expect(w.register(s, RequestId('other'))).toBeUndefined();
    a.cancel();
    expect(w.register(s, RequestId('other'))).toBeDefined();
  });
});
