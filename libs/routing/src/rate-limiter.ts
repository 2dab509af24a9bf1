/**
 * Per-tenant rate limits on Acquire at the router
 * (docs/decisions/0020-tenant-quotas-and-rate-limits.md): a token bucket
 * per namespace that has `acquiresPerSecond`, refilled at that rate and
 * holding at most one second of it (at least one token), so a tenant may
 * burst to its rate after a quiet second and no further. An Acquire that
 * finds the bucket empty is RESOURCE_EXHAUSTED TOO_MANY_REQUESTS, with the
 * wait until the next token in its `retry-after-ms` metadata. Each router
 * limits on its own: a tenant reaching N routers may get N times its rate
 * (the decision says why that is accepted).
 *
 * The limits come from the routing source (the control plane's tenant list,
 * polled); the clock is injected.
 */
import { FencerError } from '@fencer/base';

/** Namespaces with a bucket at once: one per tenant with a rate, the contract's route bound (ROUTES_MAX) and then some. */
export const RATE_LIMITED_NAMESPACES_MAX = 1_000_000;
/** Burst a bucket holds: this long of its rate. */
export const BURST_MS = 1_000;

/** Rounding slack of token arithmetic. */
const TOKEN_EPSILON = 1e-9;

interface Bucket {
  /** Acquires per second. */
  rate: number;
  tokens: number;
  /** Clock reading of the last refill, in ms. */
  atMs: number;
}

export class AcquireRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private installed: ReadonlyMap<string, number> | undefined;

  /**
   * `rates` gives the rates in force (the routing source's latest map); each
   * call of `take` installs a map it has not seen yet (by identity), so
   * new limits apply from the next Acquire on.
   */
  constructor(
    private readonly rates: () => ReadonlyMap<string, number> | undefined = () => undefined,
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  /**
   * Installs the rates, by namespace (a namespace absent has no limit). A
   * bucket whose rate is unchanged keeps its tokens; a changed one starts
   * full at its new size, so a raise applies at once.
   */
  setRates(rates: ReadonlyMap<string, number>): void {
    const now = this.nowMs();
    for (const name of [...this.buckets.keys()]) if (!rates.has(name)) this.buckets.delete(name);
    for (const [name, rate] of rates) {
      if (!(Number.isFinite(rate) && rate >= 0)) continue;
      const b = this.buckets.get(name);
      if (b !== undefined && b.rate === rate) continue;
      if (b === undefined && this.buckets.size >= RATE_LIMITED_NAMESPACES_MAX) continue;
      // A rate of 0 admits nothing: its bucket starts empty and never fills.
      this.buckets.set(name, { rate, tokens: rate === 0 ? 0 : capacityOf(rate), atMs: now });
    }
  }

  /** The rate in force for `namespace`, if any. */
  rateOf(namespace: string): number | undefined {
    return this.buckets.get(namespace)?.rate;
  }

  /** Takes one token for an Acquire in `namespace`; throws TOO_MANY_REQUESTS with a retry hint when there is none. */
  take(namespace: string): void {
    const latest = this.rates();
    if (latest !== undefined && latest !== this.installed) {
      this.installed = latest;
      this.setRates(latest);
    }
    const b = this.buckets.get(namespace);
    if (b === undefined) return;
    const now = this.nowMs();
    b.tokens = Math.min(capacityOf(b.rate), b.tokens + ((now - b.atMs) * b.rate) / 1000);
    b.atMs = now;
    // Within a rounding error of a whole token counts as one: refills add up fractions of it.
    if (b.tokens >= 1 - TOKEN_EPSILON) {
      b.tokens = Math.max(0, b.tokens - 1);
      return;
    }
    if (b.rate === 0) {
      throw new FencerError(
        'TOO_MANY_REQUESTS',
        `namespace "${namespace}" may not acquire now (acquiresPerSecond is 0)`,
        undefined,
        BURST_MS,
      );
    }
    const retryAfterMs = Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / b.rate - TOKEN_EPSILON));
    throw new FencerError(
      'TOO_MANY_REQUESTS',
      `namespace "${namespace}" is over its ${b.rate} acquires per second; retry in ${retryAfterMs} ms`,
      undefined,
      retryAfterMs,
    );
  }
}

function capacityOf(rate: number): number {
  return Math.max(1, (rate * BURST_MS) / 1000);
}
