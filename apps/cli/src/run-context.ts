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

export interface GlobalOptions extends EndpointSources, SecurityFlags {
  json?: boolean;
  timeout: number;
}

/** What a `--secure` fleet asks of a client, as flags; each one's default is its environment variable. */
export interface SecurityFlags {
  /** The bearer token: a tenant's on the lock service, a tenant's or the admin's on the control plane. */
  token?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** The environment variable each flag defaults to. */
const SECURITY_ENV = { token: 'FENCER_TOKEN', tlsCa: 'FENCER_TLS_CA', tlsCert: 'FENCER_TLS_CERT', tlsKey: 'FENCER_TLS_KEY' } as const;
const SECURITY_FLAG = { token: '--token', tlsCa: '--tls-ca', tlsCert: '--tls-cert', tlsKey: '--tls-key' } as const;

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
  return { retryBudgetMs: g.timeout, ...securityOf(run.io.env, g), ...run.io.clientOptions, endpoints, proxies };
}

/** Each security setting with where it came from (the flag, else its variable), for messages that name it. */
function securitySettings(
  env: Readonly<Record<string, string | undefined>>,
  flags: SecurityFlags,
): Partial<Record<keyof SecurityFlags, { value: string; from: string }>> {
  const out: Partial<Record<keyof SecurityFlags, { value: string; from: string }>> = {};
  for (const key of Object.keys(SECURITY_ENV) as (keyof SecurityFlags)[]) {
    const flag = flags[key];
    const fromEnv = env[SECURITY_ENV[key]];
    if (flag !== undefined && flag !== '') out[key] = { value: flag, from: SECURITY_FLAG[key] };
    else if (fromEnv !== undefined && fromEnv !== '') out[key] = { value: fromEnv, from: SECURITY_ENV[key] };
  }
  return out;
}

/**
 * What a fleet started with `--secure` asks of a client: the tenant's token
 * (--token, else $FENCER_TOKEN; sent as `authorization: Bearer`), and TLS
 * trusting the CA of --tls-ca, else $FENCER_TLS_CA (presenting the pair of
 * --tls-cert / --tls-key, else $FENCER_TLS_CERT / $FENCER_TLS_KEY, when
 * given: an operator reaching cells directly). A flag wins over its variable.
 */
export function securityOf(
  env: Readonly<Record<string, string | undefined>>,
  flags: SecurityFlags = {},
): Pick<FencerClientOptions, 'token' | 'credentials'> {
  const token = securitySettings(env, flags).token?.value;
  const credentials = tlsCredentialsOf(env, flags);
  return { ...(token ? { token } : {}), ...(credentials ? { credentials } : {}) };
}

/** The PEM files of the TLS settings, read; undefined without a CA (plaintext). A file that cannot be read is a usage error naming its flag or variable. */
export function tlsFilesOf(
  env: Readonly<Record<string, string | undefined>>,
  flags: SecurityFlags = {},
): { ca: Buffer; cert?: Buffer; key?: Buffer } | undefined {
  const s = securitySettings(env, flags);
  if ((s.tlsCert === undefined) !== (s.tlsKey === undefined))
    throw new ConfigError(
      `${(s.tlsCert ?? s.tlsKey)!.from} needs its pair: give a certificate and its key (--tls-cert and --tls-key) together`,
    );
  if (s.tlsCa === undefined) {
    if (s.tlsCert !== undefined)
      throw new ConfigError(`${s.tlsCert.from} needs --tls-ca (or $FENCER_TLS_CA): the CA that signed the fleet's certificates`);
    return undefined;
  }
  const read = (setting: { value: string; from: string }): Buffer => {
    try {
      return readFileSync(setting.value);
    } catch (e) {
      throw new ConfigError(`${setting.from}: cannot read ${setting.value}: ${(e as Error).message}`);
    }
  };
  const ca = read(s.tlsCa);
  return s.tlsCert && s.tlsKey ? { ca, cert: read(s.tlsCert), key: read(s.tlsKey) } : { ca };
}

/** TLS channel credentials from the settings (see securityOf), or undefined when no CA is given: plaintext. */
export function tlsCredentialsOf(
  env: Readonly<Record<string, string | undefined>>,
  flags: SecurityFlags = {},
): ChannelCredentials | undefined {
  const files = tlsFilesOf(env, flags);
  if (files === undefined) return undefined;
  return files.cert && files.key ? credentials.createSsl(files.ca, files.key, files.cert) : credentials.createSsl(files.ca);
}

/** The credentials of admin calls to cells: TLS as the settings say (an operator's certificate on a `--secure` fleet), else plaintext. */
export function adminCredentialsOf(env: Readonly<Record<string, string | undefined>>, flags: SecurityFlags = {}): ChannelCredentials {
  return tlsCredentialsOf(env, flags) ?? credentials.createInsecure();
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
