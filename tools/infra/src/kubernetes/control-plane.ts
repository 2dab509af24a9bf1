/**
 * The control plane on Kubernetes: a StatefulSet of its meta group's
 * instances (ids are pod names, logs on claims), the headless Service their
 * Raft peers and forwarding use, the API Service routers, proxies and
 * operators call, the cells ConfigMap (--cells-file: which replicas each
 * cell has, by DNS name), the Secret with the tokens, and a PDB that keeps
 * a majority. Readiness is GET /v1/health (an instance that leads or knows
 * the leader); liveness the metrics listener's /livez.
 */
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { cellName, replicaHost } from './cells.js';
import { type FleetParams, PORTS } from './params.js';
import { container, labels, podSecurityContext, probes, selectorLabels, spread, tmpVolume } from './pods.js';

export const CONTROL_PLANE = 'control-plane';
/** The Service routers, proxies and operators call. */
export const CONTROL_PLANE_API = 'control-plane-api';
/** The Secret: `admin-token` (the control plane's, --admin-token-file) and `front-end-token` (routers' and proxies'). */
export const TOKENS_SECRET = 'fencer-tokens';
const CELLS_CONFIG = 'fencer-cells';

export function controlPlaneHost(p: FleetParams, ordinal: number): string {
  return `${CONTROL_PLANE}-${ordinal}.${CONTROL_PLANE}.${p.namespace}.svc.${p.clusterDomain}`;
}

/** Every instance's API URL, as routers and proxies take them (--control-plane URL,URL…). */
export function controlPlaneUrls(p: FleetParams): string {
  return Array.from({ length: p.controlPlanes }, (_, i) => `http://${controlPlaneHost(p, i)}:${PORTS.controlPlaneHttp}`).join(',');
}

/** The --cells-file: { cells: [{ id, replicas: [{ id, grpc, admin }] }] }. */
export function cellsFile(p: FleetParams): { cells: { id: string; replicas: { id: string; grpc: string; admin: string }[] }[] } {
  return {
    cells: Array.from({ length: p.cells }, (_, c) => {
      const cell = cellName(c);
      return {
        id: cell,
        replicas: Array.from({ length: p.replicasPerCell }, (_, r) => ({
          id: `${cell}-${r}`,
          grpc: `${replicaHost(p, cell, r)}:${PORTS.cellGrpc}`,
          admin: `${replicaHost(p, cell, r)}:${PORTS.cellAdmin}`,
        })),
      };
    }),
  };
}

function controlPlaneStatefulSet(p: FleetParams): StatefulSet {
  const ids = Array.from({ length: p.controlPlanes }, (_, i) => i);
  const main = container(p, 'control-plane', {
    args: [
      '--id=$(POD_NAME)',
      `--peers=${ids.map((i) => `${CONTROL_PLANE}-${i}=${controlPlaneHost(p, i)}:${PORTS.controlPlanePeer}`).join(',')}`,
      `--urls=${ids.map((i) => `${CONTROL_PLANE}-${i}=http://${controlPlaneHost(p, i)}:${PORTS.controlPlaneHttp}`).join(',')}`,
      `--listen=0.0.0.0:${PORTS.controlPlaneHttp}`,
      `--peer-listen=0.0.0.0:${PORTS.controlPlanePeer}`,
      `--metrics=0.0.0.0:${PORTS.controlPlaneMetrics}`,
      '--data-dir=/data',
      '--cells-file=/etc/fencer/cells/cells.json',
      '--auth',
      '--admin-token-file=/etc/fencer/tokens/admin-token',
    ],
    ports: [
      { name: 'http', containerPort: PORTS.controlPlaneHttp },
      { name: 'peer', containerPort: PORTS.controlPlanePeer },
      { name: 'metrics', containerPort: PORTS.controlPlaneMetrics },
    ],
    volumeMounts: [
      { name: 'data', mountPath: '/data' },
      { name: 'cells', mountPath: '/etc/fencer/cells', readOnly: true },
      { name: 'tokens', mountPath: '/etc/fencer/tokens', readOnly: true },
    ],
    probes: probes(PORTS.controlPlaneMetrics, { path: '/v1/health', port: PORTS.controlPlaneHttp }),
  });
  const selector = selectorLabels('control-plane');
  return new StatefulSet({
    metadata: { name: CONTROL_PLANE, namespace: p.namespace, labels: labels('control-plane') },
    spec: {
      serviceName: CONTROL_PLANE,
      replicas: p.controlPlanes,
      podManagementPolicy: 'Parallel',
      updateStrategy: { type: 'RollingUpdate' },
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: labels('control-plane') },
        spec: {
          securityContext: podSecurityContext,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30,
          affinity: spread(selector, true),
          containers: [main],
          volumes: [
            tmpVolume,
            { name: 'cells', configMap: { name: CELLS_CONFIG } },
            { name: 'tokens', secret: { secretName: TOKENS_SECRET, items: [{ key: 'admin-token', path: 'admin-token', mode: 0o400 }] } },
          ],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: labels('control-plane') },
          spec: {
            accessModes: ['ReadWriteOnce'],
            ...(p.storageClass !== undefined ? { storageClassName: p.storageClass } : {}),
            resources: { requests: { storage: p.controlPlaneStorage } },
          },
        },
      ],
    },
  });
}

export function controlPlaneObjects(p: FleetParams): (StatefulSet | Service | ConfigMap | Secret | PodDisruptionBudget)[] {
  const selector = selectorLabels('control-plane');
  const port = (name: string, n: number) => ({ name, port: n, targetPort: n, protocol: 'TCP' as const });
  return [
    new ConfigMap({
      metadata: { name: CELLS_CONFIG, namespace: p.namespace, labels: labels('control-plane') },
      data: { 'cells.json': `${JSON.stringify(cellsFile(p), null, 2)}\n` },
    }),
    new Secret({
      metadata: {
        name: TOKENS_SECRET,
        namespace: p.namespace,
        labels: labels('control-plane'),
        annotations: {
          // Empty until filled: the control plane refuses an empty token file at start, so nothing runs open by mistake.
          'fencer.io/fill-with':
            'kubectl -n NAMESPACE create secret generic fencer-tokens --from-literal=admin-token=… --from-literal=front-end-token=… --dry-run=client -o yaml | kubectl apply -f -',
        },
      },
      type: 'Opaque',
      stringData: { 'admin-token': '', 'front-end-token': '' },
    }),
    new Service({
      metadata: { name: CONTROL_PLANE, namespace: p.namespace, labels: labels('control-plane') },
      spec: {
        clusterIP: 'None',
        publishNotReadyAddresses: true,
        selector,
        ports: [port('http', PORTS.controlPlaneHttp), port('peer', PORTS.controlPlanePeer), port('metrics', PORTS.controlPlaneMetrics)],
      },
    }),
    new Service({
      metadata: { name: CONTROL_PLANE_API, namespace: p.namespace, labels: labels('control-plane') },
      spec: { type: 'ClusterIP', selector, ports: [port('http', PORTS.controlPlaneHttp)] },
    }),
    controlPlaneStatefulSet(p),
    new PodDisruptionBudget({
      metadata: { name: CONTROL_PLANE, namespace: p.namespace, labels: labels('control-plane') },
      spec: { maxUnavailable: 1, selector: { matchLabels: selector } },
    }),
  ];
}
