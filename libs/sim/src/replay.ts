/**
 * The one command that replays a run exactly. Options not named here take
 * their defaults (the sweep's, or the bug profile's), as in the run that failed.
 */
import type { SimOptions } from './options.js';

/** `bug`: the run had that bug on (its profile); `profile`: the run used a bug's fault profile with the bug off. */
export function replayCommand(options: SimOptions, bug?: string, profile?: string): string {
  const parts = ['node tools/sim/run.mjs', `--seed ${options.seed}`, `--seconds ${options.seconds}`, `--replicas ${options.replicas}`];
  if (options.machine !== 'lock') parts.push(`--machine ${options.machine}`);
  if (options.planted !== null) parts.push(`--planted ${options.planted}`);
  if (bug !== undefined) parts.push(`--bug ${bug}`);
  else if (profile !== undefined) parts.push(`--profile ${profile}`);
  return parts.join(' ');
}
