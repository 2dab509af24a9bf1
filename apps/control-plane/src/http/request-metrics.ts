/** Request counts and latency by route template (not by concrete URL, which would grow with every namespace). */
import type { FastifyInstance } from 'fastify';
import type { Counter, Gauge, Histogram } from 'prom-client';

export interface AppMetrics {
  readonly requests: Counter<'route' | 'method' | 'status'>;
  readonly latency: Histogram<'route'>;
  /** Dashboard event streams open on this instance, and tenants whose locks it watches (routes/dashboard.ts). */
  readonly dashboardStreams?: Gauge;
  readonly dashboardWatches?: Gauge;
}

/** Installs the metrics hook on the root instance, so it sees every route plugin's answers. */
export function installRequestMetrics(app: FastifyInstance, metrics: AppMetrics): void {
  const { requests, latency } = metrics;
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ route, method: request.method, status: String(reply.statusCode) });
    latency.observe({ route }, reply.elapsedTime / 1000);
  });
}
