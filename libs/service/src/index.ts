/**
 * @fencer/service: what every Fencer process shares around its own work: one
 * logger, the Prometheus endpoint, a clean stop on SIGTERM/SIGINT, the exits
 * for a bug (1) and for a bad command line (2), and the option parsers of
 * its flags. A process's main.ts is its configuration and these calls.
 */
export { createLogger, type Logger, type LoggerOptions } from './logger.js';
export { serveMetrics } from './metrics-endpoint.js';
export { stopOnSignals } from './signals.js';
export { exitOnBug, exitOnConfigError, fatalExit, writeBeforeExit, type Die } from './exits.js';
export { address, positiveInt } from './cli-options.js';
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
