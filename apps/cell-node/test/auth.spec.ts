/**
 * Goal: a cell node with --auth checks tenant tokens against the hashes
 * replicated into its log (docs/decisions/0016-tenant-credentials-and-mtls.md):
 * a follower forwards the caller's token with the call and the leader
 * checks it (the current token passes, a rotated-out one past its grace and
 * a missing one do not, the admin token of --admin-token-file passes);
 * KeepAlive checks each session against its stream's token; a proxy's
 * HeartbeatBatch sessions are checked against the tokens sent with them
 * (answered forbidden, not extended); ListNamespaces reports the hashes.
 * Method: a real three-replica cell on 127.0.0.1 started --managed --auth;
 * the namespace is claimed and given its hashes through the admin API (what
 * the control plane does); calls go to a follower directly, with `once`
 * semantics (one attempt), and to the leader's internal service.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { internalpb, lockservice, type adminpb } from '@fencer/protocol';
import { admin, type Cell, startCell } from './support/cell.js';

const hashOf = (token: string): string => `sha256:${createHash('sha256').update(token).digest('hex')}`;
const NS = 'tenant';
const CURRENT = 'fencer_tenant_current';
const ROTATED_OUT = 'fencer_tenant_rotated-out';
const ADMIN = 'fencer_admin_for-this-test';

let cell: Cell;
let dir: string;
let leaderAdmin: string;
let leaderGrpc: string;
let follower: InstanceType<typeof lockservice.LockServiceClient>;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-cell-auth-'));
  const adminFile = path.join(dir, 'admin-token');
  writeFileSync(adminFile, `${ADMIN}\n`, { mode: 0o600 });
  cell = await startCell({ replicas: 3, extraArgs: ['--managed', '--auth', '--admin-token-file', adminFile] });
  const leader = await cell.leader();
  const plan = cell.replicas.find((r) => r.id === leader.leaderId)!;
  leaderAdmin = plan.admin;
  leaderGrpc = plan.grpc;
  follower = new lockservice.LockServiceClient(cell.replicas.find((r) => r.id !== leader.leaderId)!.grpc, credentials.createInsecure());
  await admin(leaderAdmin, 'claimNamespace', { namespace: NS });
  const hashes: adminpb.CredentialHash[] = [
    { hash: hashOf(CURRENT), validUntilMs: 0 },
    { hash: hashOf(ROTATED_OUT), validUntilMs: Date.now() - 1 },
  ];
  await admin(leaderAdmin, 'setNamespaceCredentials', { namespace: NS, credentials: hashes });
}, 120_000);

afterAll(async () => {
  follower?.close();
  await cell?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function md(token: string | undefined): Metadata {
  const m = new Metadata();
  if (token !== undefined) m.set('authorization', `Bearer ${token}`);
  return m;
}

function reasonOf(e: ServiceError | null): string {
  return e === null ? 'OK' : `${status[e.code]} ${String(e.metadata?.get('lock-reason')[0] ?? e.details)}`;
}

function openOn(token: string | undefined, namespace = NS): Promise<{ reason: string; sessionId: string }> {
  return new Promise((resolve) =>
    follower.openSession({ namespace, clientId: 'auth', ttlMs: 60_000 }, md(token), { deadline: Date.now() + 15_000 }, (e, res) =>
      resolve({ reason: reasonOf(e), sessionId: res?.sessionId ?? '' }),
    ),
  );
}

describe('tenant tokens on a cell node', () => {
  it('a follower forwards the token and the leader checks it', async () => {
    expect((await openOn(CURRENT)).reason).toBe('OK');
    expect((await openOn(ADMIN)).reason).toBe('OK');
    expect((await openOn(undefined)).reason).toBe('UNAUTHENTICATED BAD_CREDENTIALS');
    expect((await openOn(ROTATED_OUT)).reason).toBe('PERMISSION_DENIED NAMESPACE_FORBIDDEN');
    expect((await openOn('fencer_tenant_nobody')).reason).toBe('PERMISSION_DENIED NAMESPACE_FORBIDDEN');
    // A namespace this cell does not hold keeps its routing answer (a router re-routes on it).
    expect((await openOn(CURRENT, 'elsewhere')).reason).toBe('FAILED_PRECONDITION NAMESPACE_NOT_HERE');
  });

  it('KeepAlive refuses a session its stream token does not grant, and extends one it does', async () => {
    const { sessionId } = await openOn(CURRENT);
    const heartbeat = (token: string): Promise<string> =>
      new Promise((resolve) => {
        const stream = follower.keepAlive(md(token));
        stream.on('data', (a: lockservice.KeepAliveResponse) => {
          stream.cancel();
          resolve(a.ttlMsRemaining > 0 ? 'extended' : 'not extended');
        });
        stream.on('error', (e: ServiceError) => resolve(reasonOf(e)));
        stream.write({ sessionId });
      });
    expect(await heartbeat(CURRENT)).toBe('extended');
    expect(await heartbeat('fencer_tenant_nobody')).toBe('PERMISSION_DENIED NAMESPACE_FORBIDDEN');
  });

  it("a proxy's HeartbeatBatch: each session is checked against the token sent with it", async () => {
    const { sessionId } = await openOn(CURRENT);
    const internal = new internalpb.CellInternalClient(leaderGrpc, credentials.createInsecure());
    const res = await new Promise<internalpb.HeartbeatBatchResponse>((resolve, reject) =>
      internal.heartbeatBatch(
        { sessionIds: [sessionId, sessionId], proxyId: 'test', tokens: [CURRENT, 'fencer_tenant_nobody'], tokenIndex: [1, 2] },
        new Metadata(),
        { deadline: Date.now() + 15_000 },
        (e, r) => (e ? reject(e) : resolve(r)),
      ),
    );
    internal.close();
    expect(res.sessions.map((s) => ({ forbidden: s.forbidden, extended: s.ttlMsRemaining > 0 }))).toEqual([
      { forbidden: false, extended: true },
      { forbidden: true, extended: false },
    ]);
  });

  it('ListNamespaces reports the hashes the namespace holds', async () => {
    const list = await admin<adminpb.ListNamespacesRequest, adminpb.ListNamespacesResponse>(leaderAdmin, 'listNamespaces', {});
    expect(list.namespaces.find((n) => n.namespace === NS)?.credentials.map((c) => c.hash)).toEqual([hashOf(CURRENT), hashOf(ROTATED_OUT)]);
  });
});
