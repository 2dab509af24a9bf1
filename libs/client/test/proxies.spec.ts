/**
 * Goal: with session proxies configured, the client sends its KeepAlive
 * stream to a proxy and every other call to its endpoints (the routers), and
 * a broken stream fails over to the next proxy, never to a router.
 * Method: one in-process fake LockService listening on three ports (one
 * state): one plays the router, two the proxies; the client's observer
 * reports the address each heartbeat left for.
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

describe('session proxies', () => {
  it('carry the KeepAlive stream; calls go to the endpoints; a broken stream moves to the other proxy', async () => {
    fake = await FakeLockService.start();
    const proxies = [await fake.addPort(), await fake.addPort()];
    const sentTo: string[] = [];
    client = new FencerClient({
      endpoints: [fake.address],
      proxies,
      ttlMs: 3000,
      backoffBaseMs: 5,
      backoffMaxMs: 20,
      keepAliveObserver: { onHeartbeatSent: (_id, address) => sentTo.push(address) },
    });
    const h = await client.acquire('/ls/p/x', { waitMs: 0 });
    expect(h.token).toBeGreaterThan(0);
    expect(client.endpoints.preferred).toBe(fake.address);
    expect(client.keepAliveEndpoints.all).toEqual(proxies);
    const firstProxy = await new Promise<string>((resolve) => {
      const poll = setInterval(() => {
        if (sentTo.length > 0) {
          clearInterval(poll);
          resolve(sentTo[0]!);
        }
      }, 5);
    });
    expect(proxies).toContain(firstProxy);
    const before = sentTo.length;
    fake.breakKeepAlives('NO_LEADER');
    const other = proxies.find((p) => p !== firstProxy)!;
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (sentTo.slice(before).includes(other)) {
          clearInterval(poll);
          resolve();
        }
      }, 5);
    });
    expect(sentTo).not.toContain(fake.address);
    expect(h.held).toBe(true);
  });
});
