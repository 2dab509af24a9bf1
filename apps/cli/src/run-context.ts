/**
 * What every command's action shares within one `fencer` run: the io, the
 * one interrupt (Ctrl-C, SIGTERM, or a test's signal), where the exit code
 * goes, and the global options (endpoints, --json, --timeout) with the
 * argument parsers they use.
 */
import { InvalidArgumentError } from 'commander';
import { FencerClient, parseDuration, type FencerClientOptions } from '@fencer/client';
import { resolveEndpoints, type EndpointSources } from './config.js';
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
  return { retryBudgetMs: g.timeout, ...run.io.clientOptions, endpoints, proxies };
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
