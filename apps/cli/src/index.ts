export { runCli } from './cli.js';
export { type CliIo, processIo } from './io.js';
export { EXIT, EXIT_CODES_HELP, exitCodeFor, type ExitCode } from './exit-codes.js';
export { resolveEndpoints, resolveAdminEndpoints, findFleetFile, ConfigError } from './config.js';
