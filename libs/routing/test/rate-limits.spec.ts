/**
 * Goal: per-tenant Acquire rate limits at the router
 * (docs/decisions/0020-tenant-quotas-and-rate-limits.md): a tenant over its
 * acquiresPerSecond gets RESOURCE_EXHAUSTED TOO_MANY_REQUESTS with a
 * `retry-after-ms` hint that is when its next acquire is admitted; the
 * bucket holds one second of the rate; a rate of 0 admits nothing; a new
 * rate applies from the next Acquire; other namespaces and other calls are
 * not limited; and the rates are read from GET /v1/tenants's list.
 * Method: the limiter on an injected clock; then an in-process router with a
 * static table whose source reports rates, in front of the client library's
 * fake LockService, asked with single attempts (no client retries).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { FencerError } from '@fencer/base';
import { FakeLockService } from '@fencer/client/testing';
import { TestClient, errorOf } from '@fencer/fleet/contract';
import { AcquireRateLimiter, buildRouter, parseRates, StaticRoutingSource, type Router } from '../src/index.js';

function refusal(f: () => void): FencerError | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    return e as FencerError;
  }
}

describe('the acquire rate limiter', () => {
  it('admits a burst of one second of the rate, then one per 1/rate, hinting the wait', () => {
    let now = 0;
    const rates = new Map([['ns', 4]]);
    const limiter = new AcquireRateLimiter(
      () => rates,
      () => now,
    );
    for (let i = 0; i < 4; i++) expect(refusal(() => limiter.take('ns'))).toBeUndefined();
    const e = refusal(() => limiter.take('ns'));
    expect(e).toMatchObject({ code: 'TOO_MANY_REQUESTS', retryAfterMs: 250 });
    now += 249;
    expect(refusal(() => limiter.take('ns'))?.retryAfterMs).toBe(1);
    now += 1;
    expect(refusal(() => limiter.take('ns'))).toBeUndefined();
    // Another namespace has no limit.
    for (let i = 0; i < 100; i++) expect(refusal(() => limiter.take('other'))).toBeUndefined();
  });

  it('a fractional rate still admits one, a rate of 0 admits none, and a new rate applies at once', () => {
    let now = 0;
    let rates: ReadonlyMap<string, number> = new Map([
      ['slow', 0.5],
      ['shut', 0],
    ]);
    const limiter = new AcquireRateLimiter(
      () => rates,
      () => now,
    );
    expect(refusal(() => limiter.take('slow'))).toBeUndefined();
    expect(refusal(() => limiter.take('slow'))).toMatchObject({ retryAfterMs: 2_000 });
    expect(refusal(() => limiter.take('shut'))).toMatchObject({ code: 'TOO_MANY_REQUESTS' });
    now += 60_000;
    expect(refusal(() => limiter.take('shut'))).toMatchObject({ code: 'TOO_MANY_REQUESTS' });
    rates = new Map([['slow', 100]]);
    for (let i = 0; i < 100; i++) expect(refusal(() => limiter.take('slow'))).toBeUndefined();
    expect(refusal(() => limiter.take('shut'))).toBeUndefined();
  });

  it('reads the rates from the control plane’s tenant list, skipping what is malformed', () => {
    const rates = parseRates([
      { namespace: 'a', quotas: { acquiresPerSecond: 5 } },
      { namespace: 'b', quotas: { maxSessions: 3 } },
      { namespace: 'c', quotas: { acquiresPerSecond: -1 } },
      { namespace: 7, quotas: { acquiresPerSecond: 1 } },
      null,
      { namespace: 'd', quotas: { acquiresPerSecond: 0 } },
    ]);
    expect([...rates]).toEqual([
      ['a', 5],
      ['d', 0],
    ]);
    expect(parseRates('nonsense').size).toBe(0);
  });
});

let router: Router | undefined;
let fake: FakeLockService | undefined;
let client: TestClient | undefined;
afterEach(async () => {
  client?.close();
  await router?.close();
  await fake?.stop();
});

describe('rate limits in the router', () => {
  it('answers TOO_MANY_REQUESTS with retry-after-ms past the rate; reads and other tenants pass', async () => {
    fake = await FakeLockService.start();
    const cells = new Map([['cell-1', { id: 'cell-1', replicas: [fake.address] }]]);
    const routes = new Map(['ns', 'free'].map((n) => [n, { namespace: n, cell: 'cell-1', state: 'active' as const }]));
    const source = new StaticRoutingSource({ version: 1, cells, routes });
    const rates = new Map([['ns', 2]]);
    (source as { acquireRates?: () => ReadonlyMap<string, number> }).acquireRates = () => rates;
    router = buildRouter({ source, logger: pino({ level: 'silent' }) });
    const at = await router.listen('127.0.0.1:0');
    client = new TestClient([at]);
    const a = (await client.openSession('ns')).sessionId;
    const f = (await client.openSession('free')).sessionId;
    const acquire = (sessionId: string, name: string, requestId: string) =>
      client!.once(at, 'acquire', { sessionId, name, mode: 1, waitMs: 0, requestId, lockDelayMs: 0 });
    await acquire(a, '/ls/ns/x', 'r1');
    await acquire(a, '/ls/ns/y', 'r2');
    const e = await errorOf(acquire(a, '/ls/ns/z', 'r3'));
    expect(e.code).toBe('TOO_MANY_REQUESTS');
    expect(e.retryAfterMs).toBeGreaterThan(0);
    expect(e.retryAfterMs).toBeLessThanOrEqual(500);
    expect(e.message).toMatch(/2 acquires per second/);
    // Reads are not acquires, and another tenant has its own (no) limit.
    await client.once(at, 'getLock', { name: '/ls/ns/x' });
    for (let i = 0; i < 5; i++) await acquire(f, `/ls/free/${i}`, `f${i}`);
  });
});
