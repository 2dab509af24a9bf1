/**
 * The process's own Prometheus metrics (CPU, memory, heap, GC, handles,
 * event-loop lag: prom-client's defaults), with the event loop sampled at an
 * idle-friendly rate. prom-client samples the loop's delay every 10 ms by
 * default: a timer that wakes every Fencer process 100 times a second even
 * when nothing happens, which at eight cells (about 50 processes) was a
 * large share of the fleet's idle CPU (README, footprint).
 */
import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * How often the event loop's delay is sampled (prom-client's default is
 * 10 ms). Each sample is a timer that wakes the process: at 100 ms it woke
 * an idle follower as often as its Raft tick, about 10 of its 23 wake-ups a
 * second, and on this VM a wake-up costs more than the work it does (an
 * idle follower's JavaScript is 1–2 ms/s of its 6–8 ms/s; docs/benchmarks.md,
 * footprint). Sampled once a second, a stall still shows whenever a sample
 * falls due during it (the sample runs late by what is left of the stall),
 * so every stall of a second or more is seen, and shorter ones in
 * proportion to their length.
 */
export const EVENT_LOOP_SAMPLE_MS = 1_000;

/** Registers the process metrics on `registry`, sampling the event loop every EVENT_LOOP_SAMPLE_MS. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}
