/**
 * Goal: the project's contract cases pass through the cell router when the
 * fleet runs with mutual TLS on every link (decision 0016): replicas talk
 * over TLS peer links, the router and the proxy reach the cells with their
 * certificates, and clients reach the router over TLS; a plaintext client is
 * refused by the router, by the proxy and by a cell.
 * Method: @fencer/fleet starts 1 cell x 3 cell-node processes, a router and
 * a proxy on 127.0.0.1 with `tls: true` (certificates from
 * tools/scripts/dev-ca.mjs, openssl); the shared cases of
 * @fencer/fleet/contract run with an operator's certificate. Without openssl
 * the file skips and says so (and fails under CI=true).
 */
import { Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockservice } from '@fencer/protocol';
import { opensslMissing } from '@fencer/service/testing';
import { contractSuite, TestClient } from '@fencer/fleet/contract';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';

const missing = opensslMissing();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`contract-secure.spec: ${missing}; CI=true needs it`);
if (missing !== undefined) console.warn(`contract-secure.spec: skipped: ${missing}`);

let fleet: TestFleet;
let client: TestClient;

beforeAll(async () => {
  if (missing !== undefined) return;
  fleet = await startTestFleet({
    cells: 1,
    replicas: 3,
    routers: 1,
    proxies: 1,
    autoTenants: true,
    tls: true,
    extraArgs: ['--watch-history-max', '200', '--watch-progress-ms', '1000'],
  });
  client = new TestClient(fleet.routerEndpoints);
}, 180_000);
afterAll(async () => {
  client?.close();
  await fleet?.stop();
});

if (missing === undefined)
  contractSuite({
    kind: 'router',
    target: () => ({
      client,
      leaderAddress: async () => fleet.routerEndpoints[0]!,
      followerAddress: async () => fleet.routerEndpoints[0]!,
      keepAliveAddresses: () => [...fleet.routerEndpoints, ...fleet.proxyEndpoints],
      anyAddress: () => fleet.routerEndpoints[0]!,
    }),
  });

describe.skipIf(missing !== undefined)('a plaintext client of a secure fleet', () => {
  it('is refused by the router, the proxy and a cell', async () => {
    const addresses = [fleet.routerEndpoints[0]!, fleet.proxyEndpoints[0]!, fleet.plan[0]!.replicas[0]!.grpc];
    for (const address of addresses) {
      const c = new lockservice.LockServiceClient(address, credentials.createInsecure());
      const e = await new Promise<ServiceError | null>((resolve) =>
        c.openSession({ namespace: 'plain', clientId: 't', ttlMs: 10_000 }, new Metadata(), { deadline: Date.now() + 5_000 }, (err) =>
          resolve(err),
        ),
      );
      c.close();
      expect(e?.code, address).toBe(status.UNAVAILABLE);
    }
  });
});
