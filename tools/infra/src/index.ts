/**
 * @fencer/infra: the deployment artefacts' generator and checks. The
 * Kubernetes manifests of infra/kubernetes come from renderFleet (one place
 * for the fleet's parameters and ports); the tests under test/ check them,
 * the Dockerfile, the systemd units, the alert rules and the runbook.
 */
export { DEFAULT_PARAMS, PORTS, RUN_AS_ID, checkParams, type Component, type FleetParams, type Resources } from './kubernetes/params.js';
export { fleetFiles, renderFleet, type KubeObject } from './kubernetes/fleet.js';
export { cellPeers, replicaHost } from './kubernetes/cells.js';
export { cellsFile, controlPlaneUrls, TOKENS_SECRET } from './kubernetes/control-plane.js';
export { OPERATOR_LABEL } from './kubernetes/network-policies.js';
export { MAIN } from './kubernetes/pods.js';
