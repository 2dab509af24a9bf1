/**
 * Goal: held-open Acquire calls get exactly one result: from the apply
 * stream when it decides them (even before the proposal's own answer), or
 * 'leadership-lost' when leadership moves, and none once withdrawn; the
 * node's limit holds.
 * Method: drive WaitingCalls directly and record every result handed over.
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
    h.withdraw();
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
    a.withdraw();
    expect(w.register(s, RequestId('other'), () => {})).toBeDefined();
  });

  it('hands a withdrawn call nothing, and a call withdrawn by an earlier result of the same batch nothing either', () => {
    const w = new WaitingCalls(10);
    const got: string[] = [];
    const a = w.register(s, r, (x) => got.push(`a:${x.kind}`))!;
    a.withdraw();
    expect(a.settled()).toBe(true);
    expect(w.size).toBe(0);
    let c: ReturnType<WaitingCalls['register']>;
    // b's caller gives up on c when b is answered: c is withdrawn mid-batch.
    w.register(s, r, (x) => {
      got.push(`b:${x.kind}`);
      c!.withdraw();
    });
    c = w.register(s, r, (x) => got.push(`c:${x.kind}`));
    w.resolveAll({ kind: 'leadership-lost' });
    expect(got).toEqual(['b:leadership-lost']);
    expect(w.size).toBe(0);
  });
});
