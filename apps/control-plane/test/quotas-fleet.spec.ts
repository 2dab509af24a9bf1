/**
 * Goal: issue 29's quota bar, on real processes
 * (docs/decisions/0020-tenant-quotas-and-rate-limits.md): a tenant at its
 * maxSessions gets RESOURCE_EXHAUSTED QUOTA_EXCEEDED on the next
 * OpenSession; a quota raised with PATCH /v1/tenants applies without a
 * restart of anything; and the tenant keeps its quota after a move to
 * another cell (its sessions move with it, and the next one is refused
 * there too). Tenant.usage reports the sessions from the cell.
 * Method: tools/fleet/launch.mjs (2 cells of 1 replica, 1 router, no
 * proxy, 1 control plane) on a free port block and a temporary data
 * directory. Sessions are opened through the router with the generated
 * gRPC client (TTL of an hour, so none expires during the test); the
 * control plane is called over HTTP. Calls that can meet a routing table
 * not yet updated (a new tenant, a move) are retried while the answer is a
 * routing one, with a deadline.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { type FleetJson, type LaunchedFleet, launchFleet } from './support/launched-fleet.js';

const NS = 'quota';
const ttlMs = 3_600_000;
/** Reasons that mean "the routing table has not caught up yet": retried. */
const ROUTING_REASONS = new Set(['NAMESPACE_NOT_FOUND', 'NAMESPACE_NOT_HERE', 'NAMESPACE_MOVING', 'NOT_LEADER', 'NO_LEADER']);

let launched: LaunchedFleet | undefined;
let fleet: FleetJson | undefined;
let client: InstanceType<typeof lockservice.LockServiceClient> | undefined;

beforeAll(async () => {
  launched = await launchFleet('fencer-quotas-fleet-', { cells: 2, replicas: 1, routers: 1, proxies: 0, controlPlanes: 1 }, 240_000);
  fleet = launched.fleet;
  client = new lockservice.LockServiceClient(fleet.lockService[0]!, credentials.createInsecure());
}, 300_000);

afterAll(async () => {
  client?.close();
  await launched?.stop();
}, 60_000);

async function http(method: string, urlPath: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${fleet!.controlPlane.urls[0]}${urlPath}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { status: res.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

type Opened = { sessionId: string } | { code: number; reason: string };

function openOnce(): Promise<Opened> {
  return new Promise((resolve) =>
    client!.openSession(
      { clientId: 'quota-test', ttlMs, namespace: NS },
      new Metadata(),
      { deadline: Date.now() + 10_000 },
      (e: ServiceError | null, res?: { sessionId: string }) =>
        resolve(e ? { code: e.code, reason: String(e.metadata?.get('lock-reason')[0] ?? e.details) } : { sessionId: res!.sessionId }),
    ),
  );
}

/** OpenSession through the router, retried while the answer is a routing one (the table catching up). */
async function openSession(deadlineMs = 30_000): Promise<Opened> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const r = await openOnce();
    if (!('reason' in r) || !ROUTING_REASONS.has(r.reason) || Date.now() > until) return r;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Retries `attempt` until it gives what `done` accepts, or the deadline; returns the last answer. */
async function eventually<T>(attempt: () => Promise<T>, done: (t: T) => boolean, deadlineMs: number): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const r = await attempt();
    if (done(r) || Date.now() > until) return r;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const refusedForQuota = (r: Opened) => 'reason' in r && r.reason === 'QUOTA_EXCEEDED' && r.code === 8; // RESOURCE_EXHAUSTED

describe('tenant quotas on a running fleet', () => {
  it('refuses the session past maxSessions, applies a raise without a restart, and keeps the quota after a move', async () => {
    const created = await http('POST', '/v1/tenants', { namespace: NS, cell: 'cell-1', quotas: { maxSessions: 2 } });
    expect(created.status).toBe(201);
    expect(await openSession()).toHaveProperty('sessionId');
    expect(await openSession()).toHaveProperty('sessionId');
    const third = await openSession();
    expect(third).toEqual({ code: 8, reason: 'QUOTA_EXCEEDED' });

    const patched = await http('PATCH', `/v1/tenants/${NS}`, { quotas: { maxSessions: 3 } });
    expect(patched.status).toBe(200);
    const raised = await eventually(openSession, (r) => 'sessionId' in r, 10_000);
    expect(raised).toHaveProperty('sessionId');
    expect(refusedForQuota(await openSession())).toBe(true);

    const move = await http('POST', '/v1/moves', { namespace: NS, toCell: 'cell-2' });
    expect(move.status).toBe(202);
    const id = move.json['id'] as string;
    const finished = await eventually(
      () => http('GET', `/v1/moves/${id}`),
      (m) => m.json['state'] === 'done' || m.json['state'] === 'failed',
      90_000,
    );
    expect(finished.json).toMatchObject({ state: 'done', sessions: 3 });
    const tenant = await http('GET', `/v1/tenants/${NS}`);
    expect(tenant.json).toMatchObject({ cell: 'cell-2', quotas: { maxSessions: 3 }, usage: { sessions: 3 } });
    // On cell-2 now, with its three sessions: the fourth is refused there too.
    expect(await openSession()).toEqual({ code: 8, reason: 'QUOTA_EXCEEDED' });
  }, 240_000);
});
