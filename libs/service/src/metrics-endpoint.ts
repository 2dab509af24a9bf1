/**
 * The HTTP listener every process has beside its own ports: GET /metrics
 * from one registry, and the probes an orchestrator asks (Kubernetes
 * kubelet, a load balancer, systemd's watchdog script):
 * - GET /livez: the process answers at all (its event loop turns) and, when
 *   the process gives a `live` check, that check holds. A failing liveness
 *   probe gets the process restarted, so it fails only for a state no
 *   waiting can cure.
 * - GET /readyz: the process can serve calls now (`ready`: a cell node
 *   caught up with its leader, a router or proxy holding a routing table).
 *   A failing readiness probe takes the process out of its Service's
 *   endpoints until it passes again; nothing is restarted.
 * Each answers 200 with "ok" or 503 with the reason, as text a person can
 * read in `kubectl describe` or curl.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';

/** A probe's answer: ok, or why not (one line, for a person). */
export type ProbeResult = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export interface Probes {
  /** Can the process serve calls now? Absent: ready as soon as it listens. */
  readonly ready?: () => ProbeResult;
  /** Is the process in a state only a restart cures? Absent: live while it answers. */
  readonly live?: () => ProbeResult;
}

export const PROBE_OK: ProbeResult = { ok: true };

export const notReady = (reason: string): ProbeResult => ({ ok: false, reason });

/** The paths served, for manifests and units that point probes at them. */
export const PROBE_PATHS = { metrics: '/metrics', live: '/livez', ready: '/readyz' } as const;

function answerProbe(res: ServerResponse, check: (() => ProbeResult) | undefined): void {
  let result: ProbeResult;
  try {
    result = check ? check() : PROBE_OK;
  } catch (e) {
    // A check that throws is a bug in the check, not a verdict on the process: say so, as not ready.
    result = notReady(`probe failed: ${(e as Error).message}`);
  }
  if (result.ok) res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
  else res.writeHead(503, { 'content-type': 'text/plain' }).end(`${result.reason}\n`);
}

/**
 * Serves GET /metrics from the registry, and /livez and /readyz from `probes`, on host:port (port 0 picks one);
 * resolves once listening.
 */
export function serveMetrics(address: string, registry: Registry, probes: Probes = {}): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === PROBE_PATHS.live) return answerProbe(res, probes.live);
    if (path === PROBE_PATHS.ready) return answerProbe(res, probes.ready);
    if (path !== PROBE_PATHS.metrics) {
      res.writeHead(404).end('not found: try /metrics, /livez or /readyz\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500).end(e.message),
    );
  });
  const at = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(address.slice(at + 1)), address.slice(0, at), () => resolve(server));
  });
}
