/**
 * Goal: held-open Acquire calls get exactly one answer: from the apply
 * stream when it decides them (even before the proposal's own answer), or
 * QUEUED when leadership moves; the node's limit holds.
 * Method: drive WaitingCalls directly and record every answer delivered.
 */
import { describe, expect, it } from 'vitest';
import { RequestId, Revision, SessionId } from '@fencer/base';
import { type WaitResult, WaitingCalls } from './waiting-calls.js';

const s = SessionId('ns:1');
const r = RequestId('req');

describe('WaitingCalls', () => {
  it('delivers a grant applied right after registration, once', () => {
    const w = new WaitingCalls(10);
    const got: WaitResult[] = [];
    const h = w.register(s, r, (x) => got.push(x))!;
    w.resolve(s, r, { kind: 'granted', token: Revision(9), revision: Revision(9) });
    h.cancel();
    expect(h.settled()).toBe(true);
    expect(got).toEqual([{ kind: 'granted', token: 9, revision: 9 }]);
    expect(w.size).toBe(0);
  });

  it('answers every call once, the first result winning', () => {
    const w = new WaitingCalls(10);
    const got: string[] = [];
    w.register(s, r, (x) => got.push(`a:${x.kind}`));
    w.register(s, r, (x) => got.push(`b:${x.kind}`));
    w.resolveAll({ kind: 'leadership-lost' });
    w.resolve(s, r, { kind: 'cancelled', revision: Revision(3) });
    expect(got).toEqual(['a:leadership-lost', 'b:leadership-lost']);
  });

  it('refuses registrations beyond its limit until a call ends', () => {
    const w = new WaitingCalls(1);
    const a = w.register(s, r, () => {})!;
    expect(w.register(s, RequestId('other'), () => {})).toBeUndefined();
    a.cancel();
    expect(w.register(s, RequestId('other'), () => {})).toBeDefined();
  });
});
