/**
 * What every command's action shares within one `fencer` run: the io, the
 * one interrupt (Ctrl-C, SIGTERM, or a test's signal), where the exit code
 * goes, and the global options (endpoints, --json, --timeout) with the
 * argument parsers they use.
 */
import { InvalidArgumentError } from 'commander';
import { FencerClient, parseDuration, type FencerClientOptions } from '@fencer/client';
import { readFileSync } from 'node:fs';
import { type ChannelCredentials, credentials } from '@grpc/grpc-js';
import { ConfigError, resolveEndpoints, type EndpointSources } from './config.js';
import type { CliIo } from './io.js';

export interface GlobalOptions extends EndpointSources {
  json?: boolean;
  timeout: number;
}

export interface CliRun {
  readonly io: CliIo;
  /** Aborted once on the first interrupt; its reason is the signal's name. */
  readonly interrupt: AbortSignal;
  /** The exit code of the run (the last action to finish sets it). */
  setExitCode(code: number): void;
}

export const duration =
  (flag: string) =>
  (value: string): number => {
    try {
      return parseDuration(value);
    } catch (e) {
      throw new InvalidArgumentError(`${(e as Error).message} (${flag})`);
    }
  };

export const count =
  (flag: string, min: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min)
      throw new InvalidArgumentError(`${flag} must be an integer >= ${min}, got "${value}"`);
    return n;
  };

export function clientOptionsOf(run: CliRun, g: GlobalOptions): FencerClientOptions {
  const { endpoints, proxies } = resolveEndpoints(g, run.io.env, run.io.cwd);
  return { retryBudgetMs: g.timeout, ...securityOf(run.io.env), ...run.io.clientOptions, endpoints, proxies };
}

/**
 * What a fleet started with `--secure` asks of a client, from the
 * environment: the tenant's token ($FENCER_TOKEN, sent as `authorization:
 * Bearer`), and TLS trusting $FENCER_TLS_CA (presenting $FENCER_TLS_CERT /
 * $FENCER_TLS_KEY when both are set: an operator reaching cells directly).
 */
export function securityOf(env: Readonly<Record<string, string | undefined>>): Pick<FencerClientOptions, 'token' | 'credentials'> {
  const token = env['FENCER_TOKEN'];
  const ca = env['FENCER_TLS_CA'];
  const credentials = ca ? channelCredentialsOf(env) : undefined;
  return { ...(token ? { token } : {}), ...(credentials ? { credentials } : {}) };
}

/** TLS channel credentials from $FENCER_TLS_CA (and an optional $FENCER_TLS_CERT / $FENCER_TLS_KEY pair); a file that cannot be read is a usage error. */
export function channelCredentialsOf(env: Readonly<Record<string, string | undefined>>): ChannelCredentials {
  const read = (name: string): Buffer => {
    try {
      return readFileSync(env[name]!);
    } catch (e) {
      throw new ConfigError(`${name}: cannot read ${env[name]}: ${(e as Error).message}`);
    }
  };
  const ca = read('FENCER_TLS_CA');
  if (env['FENCER_TLS_CERT'] && env['FENCER_TLS_KEY']) return credentials.createSsl(ca, read('FENCER_TLS_KEY'), read('FENCER_TLS_CERT'));
  return credentials.createSsl(ca);
}

/** JSON with --json, else the human text. */
export function print(run: CliRun, g: GlobalOptions, json: unknown, human: string): void {
  run.io.stdout(g.json ? `${JSON.stringify(json)}\n` : human);
}

/** Runs a command body with a client, closed after; errors go on to runCli, which maps them to exit codes. */
export async function withClient(run: CliRun, g: GlobalOptions, body: (c: FencerClient) => Promise<number>): Promise<number> {
  const client = new FencerClient(clientOptionsOf(run, g));
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}
