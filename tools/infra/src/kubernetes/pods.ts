/**
 * What every Fencer container shares on Kubernetes: labels, the hardened
 * security context (non-root, read-only root filesystem, no capabilities,
 * the runtime's seccomp profile), the probes on the metrics listener
 * (@fencer/service: /livez and /readyz), a writable /tmp, resources.
 */
import type { IIoK8sApiCoreV1Container, IIoK8sApiCoreV1PodSecurityContext, IIoK8sApiCoreV1Probe } from 'kubernetes-models/v1';
import { PROBE_PATHS } from '@fencer/service';
import { type Component, type FleetParams, RUN_AS_ID } from './params.js';

export const PART_OF = 'fencer';

/** The labels that select one component's pods (and, for a cell, one cell's). */
export function selectorLabels(component: Component, cell?: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': component,
    'app.kubernetes.io/part-of': PART_OF,
    ...(cell !== undefined ? { 'fencer.io/cell': cell } : {}),
  };
}

/** Every label an object carries. */
export function labels(component: Component, cell?: string): Record<string, string> {
  return { ...selectorLabels(component, cell), 'app.kubernetes.io/managed-by': 'fencer-infra' };
}

export const podSecurityContext: IIoK8sApiCoreV1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: RUN_AS_ID,
  runAsGroup: RUN_AS_ID,
  // Volumes (the WAL's) are made writable by the group the process runs as.
  fsGroup: RUN_AS_ID,
  seccompProfile: { type: 'RuntimeDefault' },
};

const containerSecurityContext: IIoK8sApiCoreV1Container['securityContext'] = {
  runAsNonRoot: true,
  runAsUser: RUN_AS_ID,
  runAsGroup: RUN_AS_ID,
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  privileged: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** The image's entry point of each component (infra/Dockerfile puts the apps under /app). */
export const MAIN: Readonly<Record<Component, string>> = {
  'cell-node': '/app/apps/cell-node/dist/main.js',
  'control-plane': '/app/apps/control-plane/dist/main.js',
  'cell-router': '/app/apps/cell-router/dist/main.js',
  'session-proxy': '/app/apps/session-proxy/dist/main.js',
};

export function httpProbe(path: string, port: number, o: { periodSeconds: number; failureThreshold: number }): IIoK8sApiCoreV1Probe {
  return { httpGet: { path, port }, periodSeconds: o.periodSeconds, failureThreshold: o.failureThreshold, timeoutSeconds: 2 };
}

/**
 * Liveness on /livez (a restart only after 30 s of no answer), readiness on `readyPath` (out of the Service's
 * endpoints after 10 s), and a startup probe that gives recovery (a WAL replay, a snapshot load) up to 10 minutes
 * before liveness counts.
 */
export function probes(metricsPort: number, ready: { path: string; port: number } = { path: PROBE_PATHS.ready, port: metricsPort }) {
  return {
    startupProbe: httpProbe(PROBE_PATHS.live, metricsPort, { periodSeconds: 5, failureThreshold: 120 }),
    livenessProbe: httpProbe(PROBE_PATHS.live, metricsPort, { periodSeconds: 10, failureThreshold: 3 }),
    readinessProbe: httpProbe(ready.path, ready.port, { periodSeconds: 5, failureThreshold: 2 }),
  };
}

/** The container of `component`: its entry point with `args`, hardened, with resources, probes and a writable /tmp. */
export function container(
  p: FleetParams,
  component: Component,
  o: {
    args: string[];
    ports: { name: string; containerPort: number }[];
    env?: IIoK8sApiCoreV1Container['env'];
    volumeMounts?: IIoK8sApiCoreV1Container['volumeMounts'];
    probes: ReturnType<typeof probes>;
  },
): IIoK8sApiCoreV1Container {
  const r = p.resources[component];
  return {
    name: component,
    image: p.image,
    imagePullPolicy: 'IfNotPresent',
    command: ['node', MAIN[component]],
    args: o.args,
    ports: o.ports.map((x) => ({ ...x, protocol: 'TCP' })),
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'NODE_ENV', value: 'production' },
      ...(o.env ?? []),
    ],
    resources: { requests: { cpu: r.cpu, memory: r.memory }, limits: { cpu: r.cpuLimit, memory: r.memoryLimit } },
    securityContext: containerSecurityContext,
    volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }, ...(o.volumeMounts ?? [])],
    ...o.probes,
  };
}

/** The pod's own /tmp (the root filesystem is read-only). */
export const tmpVolume = { name: 'tmp', emptyDir: { sizeLimit: '64Mi' } };

/** Spread over nodes (required: two replicas of a group on one node is one failure for two) and zones (preferred). */
export function spread(selector: Record<string, string>, requiredAcrossNodes: boolean) {
  const term = { labelSelector: { matchLabels: selector } };
  return {
    podAntiAffinity: {
      ...(requiredAcrossNodes
        ? { requiredDuringSchedulingIgnoredDuringExecution: [{ ...term, topologyKey: 'kubernetes.io/hostname' }] }
        : {}),
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 100, podAffinityTerm: { ...term, topologyKey: 'topology.kubernetes.io/zone' } },
        ...(requiredAcrossNodes ? [] : [{ weight: 50, podAffinityTerm: { ...term, topologyKey: 'kubernetes.io/hostname' } }]),
      ],
    },
  };
}
