/**
 * The parameters of a Fencer fleet on Kubernetes, and the ports each process
 * listens on there. One place: the manifests (fleet.ts), the units
 * (infra/systemd) and the runbook quote these numbers.
 */
export interface Resources {
  readonly cpu: string;
  readonly memory: string;
  readonly cpuLimit: string;
  readonly memoryLimit: string;
}

export interface FleetParams {
  /** The namespace everything lives in; the peers' DNS names include it. */
  readonly namespace: string;
  /** The one image with the four entry points (infra/Dockerfile). */
  readonly image: string;
  readonly cells: number;
  /** Replicas per cell: 5 (the design), 3 at least. */
  readonly replicasPerCell: number;
  /** Instances of the control plane's meta group. */
  readonly controlPlanes: number;
  readonly routers: number;
  readonly proxies: number;
  /** Each cell replica's volume (WAL and snapshots). */
  readonly cellStorage: string;
  readonly controlPlaneStorage: string;
  /** Absent: the cluster's default storage class. */
  readonly storageClass?: string;
  readonly clusterDomain: string;
  readonly resources: Readonly<Record<Component, Resources>>;
}

export type Component = 'cell-node' | 'control-plane' | 'cell-router' | 'session-proxy';

/** The ports, as the processes' flags set them (the cell node's peer port is its gRPC port + 300, as everywhere). */
export const PORTS = {
  cellGrpc: 7001,
  cellAdmin: 7101,
  cellMetrics: 7201,
  cellPeer: 7301,
  routerGrpc: 6001,
  routerMetrics: 6201,
  proxyGrpc: 6101,
  proxyMetrics: 6301,
  controlPlaneHttp: 7400,
  controlPlanePeer: 7450,
  controlPlaneMetrics: 7490,
} as const;

/** The user and group the image runs as (infra/Dockerfile creates them; no root anywhere). */
export const RUN_AS_ID = 10001;

export const DEFAULT_PARAMS: FleetParams = {
  namespace: 'fencer',
  image: 'fencer:0.1.0',
  cells: 2,
  replicasPerCell: 5,
  controlPlanes: 3,
  routers: 2,
  proxies: 2,
  cellStorage: '20Gi',
  controlPlaneStorage: '5Gi',
  clusterDomain: 'cluster.local',
  resources: {
    'cell-node': { cpu: '1', memory: '1Gi', cpuLimit: '2', memoryLimit: '2Gi' },
    'control-plane': { cpu: '250m', memory: '512Mi', cpuLimit: '1', memoryLimit: '1Gi' },
    'cell-router': { cpu: '500m', memory: '512Mi', cpuLimit: '2', memoryLimit: '1Gi' },
    'session-proxy': { cpu: '250m', memory: '256Mi', cpuLimit: '1', memoryLimit: '512Mi' },
  },
};

/** Refuses parameters no fleet can run with, naming the parameter. */
export function checkParams(p: FleetParams): FleetParams {
  const fail = (what: string): never => {
    throw new Error(`fleet parameters: ${what}`);
  };
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(p.namespace)) fail(`namespace "${p.namespace}" is not a DNS label`);
  if (!Number.isInteger(p.cells) || p.cells < 1) fail('cells must be an integer >= 1');
  if (!Number.isInteger(p.replicasPerCell) || p.replicasPerCell < 3)
    fail('replicasPerCell must be an integer >= 3 (a majority must survive one loss)');
  if (!Number.isInteger(p.controlPlanes) || p.controlPlanes < 1 || p.controlPlanes % 2 === 0) fail('controlPlanes must be odd (1, 3, 5)');
  for (const [k, n] of [
    ['routers', p.routers],
    ['proxies', p.proxies],
  ] as const)
    if (!Number.isInteger(n) || n < 1) fail(`${k} must be >= 1`);
  if (p.image.trim() === '') fail('image is empty');
  return p;
}
