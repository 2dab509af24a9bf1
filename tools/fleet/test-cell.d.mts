import type { ChildProcess } from 'node:child_process';
import type { adminpb } from '@fencer/protocol';
import type { FrontendPlan, ReplicaPlan } from './fleet.mjs';

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
  readonly routingFile: string;
  readonly dataDir: string;
  readonly children: Map<string, ChildProcess>;
  readonly routerEndpoints: string[];
  readonly proxyEndpoints: string[];
  /** Status of the leader of one cell (waits for one among its live replicas). */
  leaderOf(cellId: string, timeoutMs?: number): Promise<adminpb.StatusResponse>;
  statusOf(id: string, timeoutMs?: number): Promise<adminpb.StatusResponse | undefined>;
  alive(id: string): boolean;
  /** Signals one process (replica, router or proxy; SIGKILL by default) and waits until it is gone. */
  kill(id: string, sig?: NodeJS.Signals): Promise<void>;
  restart(id: string): void;
  stop(): Promise<void>;
}
export declare function startTestFleet(options?: {
  cells?: number;
  replicas?: number;
  routers?: number;
  proxies?: number;
  /** namespace -> cell id, written to the routing file. */
  routes?: Record<string, string>;
  autoTenants?: boolean;
  heartbeatIntervalMs?: number;
  extraArgs?: string[];
  routerArgs?: string[];
  proxyArgs?: string[];
  /** Mutual TLS on every link, TLS to clients; this process's clients (adminClient, TestClient) present an operator's certificate. */
  tls?: boolean;
}): Promise<TestFleet>;
