import type { ChildProcess } from 'node:child_process';
import type { adminpb } from '@fencer/protocol';
import type { ControlPlanePlan, FrontendPlan, ReplicaPlan } from './fleet.mjs';

export interface TestCell {
  readonly replicas: ReplicaPlan[];
  readonly endpoints: string[];
  readonly children: Map<string, ChildProcess>;
  readonly dataDir: string;
  /** Status of the leader every live replica agrees on (waits for one). */
  leader(timeoutMs?: number): Promise<adminpb.StatusResponse>;
  /** Waits for a leader among the given replicas only (e.g. after killing one). */
  leaderAmong(ids: readonly string[], timeoutMs?: number): Promise<adminpb.StatusResponse>;
  statusOf(id: string, timeoutMs?: number): Promise<adminpb.StatusResponse | undefined>;
  signal(id: string, sig: NodeJS.Signals): void;
  /** Signals one replica (SIGKILL by default) and waits until its process is gone. */
  kill(id: string, sig?: NodeJS.Signals): Promise<void>;
  /** Starts a stopped replica again from its plan (argv, env, cwd): it rejoins with its data. */
  restart(id: string): void;
  stop(): Promise<void>;
}
export declare function freePortBase(replicas: number): Promise<number>;
/** A port base whose whole block (cells, routers +400, proxies +500, control planes +600/+650/+700) is free now. */
export declare function freeFleetPortBase(
  cells: number,
  replicas: number,
  routers: number,
  proxies: number,
  controlPlanes?: number,
): Promise<number>;
/** Releases this process's reservations of `ports` (freePortBase and freeFleetPortBase reserve theirs). */
export declare function releasePorts(ports: readonly number[]): void;
export declare function startTestCell(options?: { replicas?: number; extraArgs?: string[] }): Promise<TestCell>;

export interface TestFleet {
  readonly plan: import('./fleet.mjs').CellPlan[];
  readonly routers: FrontendPlan[];
  readonly proxies: FrontendPlan[];
  /** The meta group's instances (empty without `controlPlanes`). */
  readonly controlPlanes: ControlPlanePlan[];
  readonly controlPlaneUrls: string[];
  /** The routing file the front ends follow; undefined with a control plane. */
  readonly routingFile: string | undefined;
  readonly dataDir: string;
  readonly children: Map<string, ChildProcess>;
  readonly routerEndpoints: string[];
  readonly proxyEndpoints: string[];
  /** Status of the leader of one cell (waits for one among its live replicas). */
  leaderOf(cellId: string, timeoutMs?: number): Promise<adminpb.StatusResponse>;
  /** The live control-plane instance whose /v1/health says it leads the meta group (waits for one). */
  metaLeader(timeoutMs?: number): Promise<ControlPlanePlan>;
  statusOf(id: string, timeoutMs?: number): Promise<adminpb.StatusResponse | undefined>;
  alive(id: string): boolean;
  /** Sends a signal (SIGSTOP, SIGCONT, ...) to one process without waiting. */
  signal(id: string, sig: NodeJS.Signals): void;
  /** Signals one process (replica, control plane, router or proxy; SIGKILL by default) and waits until it is gone. */
  kill(id: string, sig?: NodeJS.Signals): Promise<void>;
  restart(id: string): void;
  stop(): Promise<void>;
}
export declare function startTestFleet(options?: {
  cells?: number;
  replicas?: number;
  routers?: number;
  proxies?: number;
  /** Control-plane instances (1 or 3): the cells run --managed and the front ends follow its routing. Default 0: a routing file. */
  controlPlanes?: number;
  /** Extra flags for every control-plane instance. */
  controlPlaneArgs?: string[];
  /** How long every cell may take to elect its first leader (default 90 s; a big fleet on a loaded machine needs more). */
  leaderWaitMs?: number;
  /** namespace -> cell id: written to the routing file, or created as tenants with a control plane. */
  routes?: Record<string, string>;
  autoTenants?: boolean;
  heartbeatIntervalMs?: number;
  extraArgs?: string[];
  routerArgs?: string[];
  proxyArgs?: string[];
  /** Mutual TLS on every link, TLS to clients; this process's clients (adminClient, TestClient) present an operator's certificate. */
  tls?: boolean;
}): Promise<TestFleet>;

export interface HeldLock {
  readonly sessionId: string;
  readonly token: number;
}
export interface LockListing {
  readonly holders: HeldLock[];
  /** Request ids of the FIFO waiters, head first. */
  readonly waiters: string[];
}
export interface QueuedWaiter {
  readonly name: string;
  readonly sessionId: string;
  readonly requestId: string;
  /** Settles when the waiter is granted (its held Acquire, resumed across early ends). */
  readonly outcome: Promise<{ token: number }>;
}
/**
 * A tenant with many sessions, held locks and queued waiters over raw gRPC
 * (one channel to a router, one KeepAlive stream to a proxy), for move tests
 * and the moves bench suite. Calls retry retryable errors with the same
 * request, as the SDK does.
 */
export declare class TenantLoad {
  constructor(opts: { router: string; proxy: string; namespace: string; ttlMs?: number; heartbeatEveryMs?: number });
  readonly namespace: string;
  readonly sessions: string[];
  /** name -> the acknowledged grant holdLocks made. */
  readonly held: Map<string, HeldLock>;
  readonly waiters: QueuedWaiter[];
  /** Sessions a KeepAlive answer called expired. */
  readonly expired: { sessionId: string; atMs: number }[];
  /** KeepAlive answers with no TTL and not expired (a move's frozen source extends no lease). */
  readonly unextended: { sessionId: string; atMs: number }[];
  /** Retryable failures the calls met, by error code. */
  readonly retries: Map<string, number>;
  name(...parts: string[]): string;
  openSessions(count: number): Promise<string[]>;
  startKeepAlive(): void;
  holdLocks(perSession: number): Promise<void>;
  /** Queues `count` waiters over `queues` locks; resolves with the listing of held/ once all are queued. */
  queueWaiters(count: number, queues: number): Promise<Map<string, LockListing>>;
  /** A blocking (or, with waitMs 0, try-) Acquire resumed with its request_id until granted; rejects on any other status. */
  waitFor(req: { sessionId: string; name: string; mode: number; waitMs: number; requestId: string; lockDelayMs: number }): Promise<{
    token: number;
  }>;
  release(name: string, sessionId: string, token: number): Promise<boolean>;
  listLocks(prefix: string): Promise<Map<string, LockListing>>;
  allHeartbeatsAnsweredSince(sinceMs: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}
