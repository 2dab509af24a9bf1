/**
 * NetworkPolicies: every Fencer pod takes only the connections the
 * architecture has (docs/architecture.md), by port and by who calls:
 * - clients → routers' and proxies' gRPC, and cell nodes' client port
 *   (clients may skip the router, decision 0015): from anywhere;
 * - a cell's replicas → each other's peer port (Raft), only within the cell;
 * - the control plane → cell nodes' admin port (status polls, claims,
 *   moves, snapshots), and operators (pods labelled fencer.io/operator)
 *   there too;
 * - routers, proxies, operators and the other instances → the control
 *   plane's HTTP API; instances → each other's peer port;
 * - Prometheus (pods labelled app.kubernetes.io/name: prometheus, any
 *   namespace) → every metrics port.
 * Ingress only: what a pod may not receive, no one can send it.
 */
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IIoK8sApiNetworkingV1NetworkPolicyPeer } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicyPeer';
import { cellName } from './cells.js';
import { type Component, type FleetParams, PORTS } from './params.js';
import { labels, selectorLabels } from './pods.js';

/** Operators' pods (where `fencer cell …` and `fencer fleet …` run) carry this label. */
export const OPERATOR_LABEL = { 'fencer.io/operator': 'true' } as const;
const PROMETHEUS: IIoK8sApiNetworkingV1NetworkPolicyPeer = {
  namespaceSelector: {},
  podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
};
const pods = (component: Component, cell?: string): IIoK8sApiNetworkingV1NetworkPolicyPeer => ({
  podSelector: { matchLabels: selectorLabels(component, cell) },
});
const operators: IIoK8sApiNetworkingV1NetworkPolicyPeer = { podSelector: { matchLabels: { ...OPERATOR_LABEL } } };

type Rule = { port: number; from?: IIoK8sApiNetworkingV1NetworkPolicyPeer[] };

function policy(p: FleetParams, name: string, component: Component, rules: Rule[], cell?: string): NetworkPolicy {
  return new NetworkPolicy({
    metadata: { name, namespace: p.namespace, labels: labels(component, cell) },
    spec: {
      podSelector: { matchLabels: selectorLabels(component, cell) },
      policyTypes: ['Ingress'],
      ingress: rules.map((r) => ({ ports: [{ port: r.port, protocol: 'TCP' }], ...(r.from ? { from: r.from } : {}) })),
    },
  });
}

export function networkPolicies(p: FleetParams): NetworkPolicy[] {
  const cells = Array.from({ length: p.cells }, (_, i) => cellName(i)).map((cell) =>
    policy(
      p,
      `${cell}-ingress`,
      'cell-node',
      [
        { port: PORTS.cellGrpc },
        { port: PORTS.cellPeer, from: [pods('cell-node', cell)] },
        { port: PORTS.cellAdmin, from: [pods('control-plane'), operators] },
        { port: PORTS.cellMetrics, from: [PROMETHEUS] },
      ],
      cell,
    ),
  );
  return [
    ...cells,
    policy(p, 'control-plane-ingress', 'control-plane', [
      { port: PORTS.controlPlaneHttp, from: [pods('cell-router'), pods('session-proxy'), pods('control-plane'), operators] },
      { port: PORTS.controlPlanePeer, from: [pods('control-plane')] },
      { port: PORTS.controlPlaneMetrics, from: [PROMETHEUS] },
    ]),
    policy(p, 'cell-router-ingress', 'cell-router', [{ port: PORTS.routerGrpc }, { port: PORTS.routerMetrics, from: [PROMETHEUS] }]),
    policy(p, 'session-proxy-ingress', 'session-proxy', [{ port: PORTS.proxyGrpc }, { port: PORTS.proxyMetrics, from: [PROMETHEUS] }]),
  ];
}
