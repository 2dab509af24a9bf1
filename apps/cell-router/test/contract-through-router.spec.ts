/**
 * Goal: the project's contract cases pass through the cell router against a
 * fleet of two cells, with the test namespaces spread over both.
 * Method: @fencer/fleet starts 2 cells x 3 cell-node processes, one router
 * (auto-tenants on: every fresh namespace goes to the cell with the fewest)
 * and two session proxies on 127.0.0.1; the shared cases of
 * @fencer/fleet/contract run with the router as their only endpoint, and
 * KeepAlive also through each proxy. Afterwards the routing file must show
 * namespaces on both cells.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractSuite, TestClient } from '@fencer/fleet/contract';
import { startTestFleet, type TestFleet } from '@fencer/fleet/testing';

let fleet: TestFleet;
let client: TestClient;

beforeAll(async () => {
  fleet = await startTestFleet({
    cells: 2,
    replicas: 3,
    routers: 1,
    proxies: 2,
    autoTenants: true,
    extraArgs: ['--watch-history-max', '200', '--watch-progress-ms', '1000'],
  });
  client = new TestClient(fleet.routerEndpoints);
}, 180_000);
afterAll(async () => {
  client?.close();
  await fleet?.stop();
});

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

describe('the fleet behind the router', () => {
  it('spread the test namespaces over both cells', () => {
    const routing = JSON.parse(readFileSync(fleet.routingFile!, 'utf8')) as { routes: { namespace: string; cell: string }[] };
    const cells = new Set(routing.routes.map((r) => r.cell));
    expect(routing.routes.length).toBeGreaterThan(4);
    expect([...cells].sort()).toEqual(['cell-1', 'cell-2']);
  });

  it('reached the cell nodes by the lane for every unary call: none went by gRPC', async () => {
    const text = await fetch(fleet.routers[0]!.metrics).then((r) => r.text());
    const count = (transport: string): number =>
      Number(new RegExp(`fencer_router_upstream_calls_total\\{transport="${transport}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    expect(count('lane')).toBeGreaterThan(100);
    expect(count('grpc')).toBe(0);
  });
});
