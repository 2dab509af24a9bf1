import type { ChildProcess } from 'node:child_process';
import type { adminpb } from '@fencer/protocol';

export interface ReplicaPlan {
  id: string;
  grpc: string;
  admin: string;
  /** The TCP peer transport's address (the gRPC port + 300). */
  peer: string;
  metrics: string;
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  dataDir: string;
  pid: number;
}
export interface CellPlan {
  id: string;
  replicas: ReplicaPlan[];
}
export declare const CELL_NODE_MAIN: string;
export declare function planFleet(opts: { replicas?: number; cells?: number; portBase?: number; dataDir: string; extraArgs?: string[]; env?: Record<string, string> }): CellPlan[];
export declare function spawnReplica(replica: ReplicaPlan, opts?: { stdio?: 'inherit' | 'ignore' | 'pipe'; logDir?: string }): ChildProcess;
export declare function adminClient(address: string): InstanceType<typeof adminpb.CellAdminClient>;
export declare function status(client: InstanceType<typeof adminpb.CellAdminClient>, timeoutMs?: number): Promise<adminpb.StatusResponse | undefined>;
export declare function waitForLeader(replicas: ReplicaPlan[], timeoutMs?: number): Promise<adminpb.StatusResponse>;
export declare function stopAll(children: ChildProcess[], graceMs?: number): Promise<void>;
export declare function writeFleetJson(dataDir: string, plan: CellPlan[]): string;
export declare function cellNodeBuilt(): boolean;
