/**
 * The process's own Prometheus metrics (CPU, memory, heap, GC, handles,
 * event-loop lag: prom-client's defaults), with the event loop sampled at an
 * idle-friendly rate. prom-client samples the loop's delay every 10 ms by
 * default: a timer that wakes every Fencer process 100 times a second even
 * when nothing happens, which at eight cells (about 50 processes) was a
 * large share of the fleet's idle CPU (README, footprint).
 */
import { collectDefaultMetrics, type Registry } from 'prom-client';

/** How often the event loop's delay is sampled (prom-client's default is 10 ms). */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** Registers the process metrics on `registry`, sampling the event loop every EVENT_LOOP_SAMPLE_MS. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}
