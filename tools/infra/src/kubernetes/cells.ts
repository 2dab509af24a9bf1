/**
 * One cell on Kubernetes: a StatefulSet of cell-node replicas (stable names
 * and volumes: a replica's id is its pod's name, its WAL its claim), the
 * headless Service that gives each replica the DNS name its peers dial, and
 * a PodDisruptionBudget that lets a drain take one replica at a time.
 *
 * Every replica starts with --peers naming all of them (the bootstrap
 * membership), so the pods start together (podManagementPolicy Parallel) and
 * the headless Service publishes addresses before readiness (a replica is
 * ready only once a leader exists, which needs its peers). Updates go one
 * pod at a time, each waiting for the last to be ready again: caught up
 * with its leader (@fencer/service /readyz). A stopping leader hands its
 * leadership to its most up-to-date follower first (SIGTERM; the grace
 * period leaves time for it).
 */
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { Service } from 'kubernetes-models/v1/Service';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { type FleetParams, PORTS } from './params.js';
import { container, labels, podSecurityContext, probes, selectorLabels, spread, tmpVolume } from './pods.js';

export const cellName = (i: number): string => `cell-${i + 1}`;

/** The DNS name of replica `ordinal` of `cell` (its StatefulSet pod through the headless Service). */
export function replicaHost(p: FleetParams, cell: string, ordinal: number): string {
  return `${cell}-${ordinal}.${cell}.${p.namespace}.svc.${p.clusterDomain}`;
}

/** --peers of every replica: id=host:grpc-port for each (the peer port is that + 300). */
export function cellPeers(p: FleetParams, cell: string): string {
  return Array.from({ length: p.replicasPerCell }, (_, i) => `${cell}-${i}=${replicaHost(p, cell, i)}:${PORTS.cellGrpc}`).join(',');
}

/** How long a stopping replica has: its leadership transfer (3 s by default) and its servers' grace, with margin. */
const TERMINATION_GRACE_SECONDS = 30;

function cellStatefulSet(p: FleetParams, cell: string): StatefulSet {
  const selector = selectorLabels('cell-node', cell);
  const main = container(p, 'cell-node', {
    args: [
      '--id=$(POD_NAME)',
      `--cell-id=${cell}`,
      `--listen=0.0.0.0:${PORTS.cellGrpc}`,
      `--admin-listen=0.0.0.0:${PORTS.cellAdmin}`,
      `--metrics-listen=0.0.0.0:${PORTS.cellMetrics}`,
      `--peer-listen=0.0.0.0:${PORTS.cellPeer}`,
      '--data-dir=/data',
      `--peers=${cellPeers(p, cell)}`,
      '--managed',
    ],
    ports: [
      { name: 'grpc', containerPort: PORTS.cellGrpc },
      { name: 'admin', containerPort: PORTS.cellAdmin },
      { name: 'metrics', containerPort: PORTS.cellMetrics },
      { name: 'peer', containerPort: PORTS.cellPeer },
    ],
    volumeMounts: [{ name: 'data', mountPath: '/data' }],
    probes: probes(PORTS.cellMetrics),
  });
  return new StatefulSet({
    metadata: { name: cell, namespace: p.namespace, labels: labels('cell-node', cell) },
    spec: {
      serviceName: cell,
      replicas: p.replicasPerCell,
      podManagementPolicy: 'Parallel',
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0 } },
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: labels('cell-node', cell) },
        spec: {
          securityContext: podSecurityContext,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: TERMINATION_GRACE_SECONDS,
          affinity: spread(selector, true),
          containers: [main],
          volumes: [tmpVolume],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: labels('cell-node', cell) },
          spec: {
            accessModes: ['ReadWriteOnce'],
            ...(p.storageClass !== undefined ? { storageClassName: p.storageClass } : {}),
            resources: { requests: { storage: p.cellStorage } },
          },
        },
      ],
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
    },
  });
}

function cellHeadlessService(p: FleetParams, cell: string): Service {
  return new Service({
    metadata: { name: cell, namespace: p.namespace, labels: labels('cell-node', cell) },
    spec: {
      clusterIP: 'None',
      // Peers must find each other before any is ready: readiness needs a leader, and a leader needs its peers.
      publishNotReadyAddresses: true,
      selector: selectorLabels('cell-node', cell),
      ports: [
        { name: 'grpc', port: PORTS.cellGrpc, targetPort: PORTS.cellGrpc, protocol: 'TCP' },
        { name: 'admin', port: PORTS.cellAdmin, targetPort: PORTS.cellAdmin, protocol: 'TCP' },
        { name: 'metrics', port: PORTS.cellMetrics, targetPort: PORTS.cellMetrics, protocol: 'TCP' },
        { name: 'peer', port: PORTS.cellPeer, targetPort: PORTS.cellPeer, protocol: 'TCP' },
      ],
    },
  });
}

function cellDisruptionBudget(p: FleetParams, cell: string): PodDisruptionBudget {
  return new PodDisruptionBudget({
    metadata: { name: cell, namespace: p.namespace, labels: labels('cell-node', cell) },
    spec: { maxUnavailable: 1, selector: { matchLabels: selectorLabels('cell-node', cell) } },
  });
}

/** Every object of every cell. */
export function cellObjects(p: FleetParams): (StatefulSet | Service | PodDisruptionBudget)[] {
  return Array.from({ length: p.cells }, (_, i) => cellName(i)).flatMap((cell) => [
    cellHeadlessService(p, cell),
    cellStatefulSet(p, cell),
    cellDisruptionBudget(p, cell),
  ]);
}
