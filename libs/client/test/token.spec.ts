/**
 * Goal: a client given a tenant token presents it as the contract says,
 * `authorization: Bearer <token>`, on every unary call and on each stream it
 * opens (KeepAlive, Watch); a client without one sends no such metadata;
 * a token that metadata cannot carry is refused when the client is made.
 * Method: the in-process fake LockService records each call's and stream's
 * authorization metadata as it opens.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FencerClient } from '../src/index.js';
import { FakeLockService } from '../src/testing/index.js';

let fake: FakeLockService | undefined;
let client: FencerClient | undefined;
afterEach(async () => {
  await client?.close();
  await fake?.stop();
});

/** Resolves when `check` holds (polled on the event loop), or fails after `limitMs`. */
async function until(check: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('tenant token', () => {
  it('rides on every call and stream as authorization: Bearer <token>', async () => {
    fake = await FakeLockService.start();
    client = new FencerClient({ endpoints: [fake.address], token: 'tenant.s3cret-token', ttlMs: 3000, backoffBaseMs: 5, backoffMaxMs: 20 });
    const h = await client.acquire('/ls/tok/x', { waitMs: 0 });
    await h.release();
    const watching = new AbortController();
    const events = client.watch('/ls/tok/x', { signal: watching.signal });
    const iterator = events[Symbol.asyncIterator]();
    await iterator.next();
    await until(() => fake!.authorizations.some((a) => a.method === 'keepAlive'), 'a KeepAlive stream');
    watching.abort();
    const methods = new Set(fake.authorizations.map((a) => a.method));
    for (const m of ['openSession', 'acquire', 'release', 'keepAlive', 'watch']) expect(methods, m).toContain(m);
    expect(new Set(fake.authorizations.map((a) => a.authorization))).toEqual(new Set(['Bearer tenant.s3cret-token']));
  });

  it('is absent without a token, and refused when metadata cannot carry it', async () => {
    fake = await FakeLockService.start();
    client = new FencerClient({ endpoints: [fake.address], ttlMs: 3000 });
    await (await client.acquire('/ls/tok/y', { waitMs: 0 })).release();
    expect(fake.authorizations.length).toBeGreaterThan(0);
    expect(fake.authorizations.every((a) => a.authorization === '')).toBe(true);
    for (const bad of ['', 'has space', 'line\nbreak', 'é'])
      expect(() => new FencerClient({ endpoints: [fake!.address], token: bad }), JSON.stringify(bad)).toThrow(/visible ASCII/);
  });
});
