/**
 * @fencer/service: what every Fencer process shares around its own work: one
 * logger, the Prometheus endpoint with the liveness and readiness probes and the process's own metrics, a clean stop on SIGTERM/SIGINT, the exits
 * for a bug (1) and for a bad command line (2), and the option parsers of
 * its flags. A process's main.ts is its configuration and these calls.
 */
export { createLogger, type Logger, type LoggerOptions } from './logger.js';
export { serveMetrics, notReady, PROBE_OK, PROBE_PATHS, type ProbeResult, type Probes } from './metrics-endpoint.js';
export { collectProcessMetrics, EVENT_LOOP_SAMPLE_MS } from './process-metrics.js';
export { stopOnSignals } from './signals.js';
export { exitOnBug, exitOnConfigError, fatalExit, writeBeforeExit, type Die } from './exits.js';
export { address, positiveInt, tlsOption } from './cli-options.js';
export {
  TlsFiles,
  type TlsMaterial,
  type TlsPaths,
  type PeerIdentity,
  describeIdentity,
  identitiesOf,
  identityOf,
  parseIdentityUri,
  readTlsMaterial,
  tlsFilePollMs,
  tlsPathsOf,
} from './tls.js';
export {
  awaitHttp2Opening,
  connectionIdleMs,
  grpcIdleServerOptions,
  HTTP2_PREFACE,
  http2OpeningTimeoutMs,
  judgeOpening,
  tlsHandshakeTimeoutMs,
  type OpeningOptions,
  type OpeningRefusal,
} from './connection-guard.js';
