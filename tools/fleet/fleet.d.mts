import type { ChildProcess } from 'node:child_process';
import type { adminpb } from '@fencer/protocol';
import type { ChannelCredentials } from '@grpc/grpc-js';

/** One process of a fleet: how to start it, and its pid once started (0 before). */
export interface PlannedProcess {
  id: string;
  /** Its Prometheus /metrics URL. */
  metrics: string;
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  pid: number;
}
export interface ReplicaPlan extends PlannedProcess {
  grpc: string;
  admin: string;
  /** The TCP peer transport's address (the gRPC port + 300). */
  peer: string;
  dataDir: string;
}
export interface CellPlan {
  id: string;
  replicas: ReplicaPlan[];
}
export declare const CELL_NODE_MAIN: string;
export declare function planFleet(opts: {
  replicas?: number;
  cells?: number;
  portBase?: number;
  dataDir: string;
  extraArgs?: string[];
  env?: Record<string, string>;
}): CellPlan[];
export declare function spawnReplica(replica: ReplicaPlan, opts?: { stdio?: 'inherit' | 'ignore' | 'pipe'; logDir?: string }): ChildProcess;
export declare function adminClient(address: string): InstanceType<typeof adminpb.CellAdminClient>;
/** Mutual TLS for every fleet planned from now on in this process (certificates from tools/scripts/dev-ca.mjs in `dir`). */
export declare function useFleetTls(dir: string | undefined): void;
/** NODE_EXTRA_CA_CERTS naming the fleet's CA under TLS (HTTPS clients of the control plane), else nothing. */
export declare function caEnv(): Record<string, string>;
export declare function fleetTlsDir(): string | undefined;
/** This process's gRPC credentials towards the fleet: an operator's certificate under TLS, else plaintext. */
export declare function fleetCredentials(): ChannelCredentials;
export declare function status(
  client: InstanceType<typeof adminpb.CellAdminClient>,
  timeoutMs?: number,
): Promise<adminpb.StatusResponse | undefined>;
export declare function waitForLeader(replicas: ReplicaPlan[], timeoutMs?: number): Promise<adminpb.StatusResponse>;
export declare function stopAll(children: ChildProcess[], graceMs?: number): Promise<void>;
export interface FrontendPlan extends PlannedProcess {
  grpc: string;
}
export interface RoutingFile {
  version: number;
  cells: { id: string; replicas: string[] }[];
  routes: { namespace: string; cell: string; state: 'active' | 'moving' }[];
}
export declare const CELL_ROUTER_MAIN: string;
export declare const SESSION_PROXY_MAIN: string;
export declare function routingFor(plan: CellPlan[], routes?: Record<string, string>): RoutingFile;
export declare function writeRoutingFile(file: string, routing: RoutingFile): string;
export interface FrontendOptions {
  count: number;
  portBase: number;
  /** Followed unless controlPlaneUrls is given. */
  routingFile?: string;
  /** Front end i gets every URL, rotated to start at controlPlaneUrls[(i-1) mod n] (`--control-plane URL,URL,...`), instead of the routing file; it fails over along the list. */
  controlPlaneUrls?: string[];
  autoTenants?: boolean;
  heartbeatIntervalMs?: number;
  extraArgs?: string[];
  env?: Record<string, string>;
}
export declare function planRouters(opts: FrontendOptions): FrontendPlan[];
export declare function planProxies(opts: FrontendOptions): FrontendPlan[];
export declare function spawnPlanned(
  p: PlannedProcess & { dataDir?: string },
  opts?: { stdio?: 'inherit' | 'ignore' | 'pipe'; logDir?: string },
): ChildProcess;
export declare function waitForPort(address: string, timeoutMs?: number): Promise<void>;
export interface ControlPlanePlan extends PlannedProcess {
  /** Base URL of its HTTP API, http://127.0.0.1:port. */
  url: string;
  http: string;
  /** Its meta-group Raft peer transport's address. */
  peer: string;
  dataDir: string;
}
export declare const CONTROL_PLANE_MAIN: string;
export declare function planControlPlanes(opts: {
  count: number;
  portBase: number;
  dataDir: string;
  cellsFile: string;
  adminTokenFile: string;
  auth?: boolean;
  extraArgs?: string[];
  env?: Record<string, string>;
}): ControlPlanePlan[];
export declare function waitForControlPlane(url: string, timeoutMs?: number, token?: string): Promise<void>;
export declare function waitForFile(file: string, timeoutMs?: number): Promise<string>;
export declare function controlPlaneBuilt(): boolean;
export declare function writeFleetJson(
  dataDir: string,
  plan: CellPlan[],
  front?: { routers?: FrontendPlan[]; proxies?: FrontendPlan[]; routingFile?: string; controlPlanes?: ControlPlanePlan[] },
): string;
export declare function frontendsBuilt(): boolean;
/** Writes `{ cells: [{ id, replicas: [{ id, grpc, admin }] }] }` (the control plane's `--cells-file`) atomically; returns the file. */
export declare function writeCellsFile(file: string, plan: CellPlan[]): string;
export declare function cellNodeBuilt(): boolean;
