/**
 * Routers and session proxies on Kubernetes: stateless Deployments (ids are
 * pod names) following the control plane (--control-plane with every
 * instance's URL, the token from the Secret), a Service each for clients,
 * and a PDB each. A rolling update replaces one pod at a time (maxSurge 1,
 * maxUnavailable 0): a new pod counts only once it holds a routing table.
 */
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { TOKENS_SECRET, controlPlaneUrls } from './control-plane.js';
import { type Component, type FleetParams, PORTS } from './params.js';
import { container, labels, podSecurityContext, probes, selectorLabels, spread, tmpVolume } from './pods.js';

interface FrontEnd {
  readonly component: Extract<Component, 'cell-router' | 'session-proxy'>;
  readonly grpc: number;
  readonly metrics: number;
  readonly count: (p: FleetParams) => number;
}

const FRONT_ENDS: readonly FrontEnd[] = [
  { component: 'cell-router', grpc: PORTS.routerGrpc, metrics: PORTS.routerMetrics, count: (p) => p.routers },
  { component: 'session-proxy', grpc: PORTS.proxyGrpc, metrics: PORTS.proxyMetrics, count: (p) => p.proxies },
];

function deployment(p: FleetParams, f: FrontEnd): Deployment {
  const selector = selectorLabels(f.component);
  const main = container(p, f.component, {
    args: [
      '--id=$(POD_NAME)',
      `--listen=0.0.0.0:${f.grpc}`,
      `--metrics-listen=0.0.0.0:${f.metrics}`,
      `--control-plane=${controlPlaneUrls(p)}`,
    ],
    ports: [
      { name: 'grpc', containerPort: f.grpc },
      { name: 'metrics', containerPort: f.metrics },
    ],
    env: [{ name: 'FENCER_CONTROL_PLANE_TOKEN', valueFrom: { secretKeyRef: { name: TOKENS_SECRET, key: 'front-end-token' } } }],
    probes: probes(f.metrics),
  });
  return new Deployment({
    metadata: { name: f.component, namespace: p.namespace, labels: labels(f.component) },
    spec: {
      replicas: f.count(p),
      selector: { matchLabels: selector },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: { labels: labels(f.component) },
        spec: {
          securityContext: podSecurityContext,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30,
          affinity: spread(selector, false),
          containers: [main],
          volumes: [tmpVolume],
        },
      },
    },
  });
}

export function frontEndObjects(p: FleetParams): (Deployment | Service | PodDisruptionBudget)[] {
  return FRONT_ENDS.flatMap((f) => [
    new Service({
      metadata: { name: f.component, namespace: p.namespace, labels: labels(f.component) },
      spec: {
        type: 'ClusterIP',
        selector: selectorLabels(f.component),
        ports: [{ name: 'grpc', port: f.grpc, targetPort: f.grpc, protocol: 'TCP' }],
      },
    }),
    deployment(p, f),
    new PodDisruptionBudget({
      metadata: { name: f.component, namespace: p.namespace, labels: labels(f.component) },
      spec: { maxUnavailable: 1, selector: { matchLabels: selectorLabels(f.component) } },
    }),
  ]);
}
