// Options the suites share, declared once: each suite adds the ones it
// takes, with its own defaults, and a --quick preset (a short smoke run)
// for the numeric ones. Values are resolved after parsing: given, else the
// --quick preset under --quick, else the default.
import { InvalidArgumentError, Option } from 'commander';

/** A positive number (seconds, counts, rates). */
export function positive(value) {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('not a non-negative number');
  return n;
}

/** A whole number of at least 1. */
export function count(value) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('not a whole number of at least 1');
  return n;
}

/** A comma-separated list. */
export function list(value) {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * Adds a numeric option with a default and (optionally) a --quick preset;
 * both are shown by --help and applied by resolve().
 */
export function numeric(cmd, flags, description, normal, quick, parse = positive) {
  const shown = quick === undefined || quick === normal ? String(normal) : `${normal}; --quick: ${quick}`;
  const opt = new Option(flags, description).argParser(parse).default(normal, shown);
  cmd.addOption(opt);
  (cmd.presets ??= new Map()).set(opt.attributeName(), quick);
  return cmd;
}

/** The options every suite takes: --json, --no-write and, with presets, --quick. */
export function common(cmd, { quick = true } = {}) {
  cmd.option('--json <file>', 'also write the results as JSON to this file');
  cmd.option('--no-write', 'leave docs/benchmarks.md alone (print only)');
  if (quick) cmd.option('--quick', 'a smoke run: short windows, small loads (each option says its --quick value)');
  return cmd;
}

/** --baseline: another checkout's build, measured in the same run. */
export function baseline(cmd, what) {
  cmd.option('--baseline <dir>', `a checkout built with \`npx nx run-many -t build\` (e.g. the tree before a change): ${what}`);
  cmd.option('--baseline-label <text>', 'what to call it in the report', 'baseline build');
  return cmd;
}

/** The parsed options, with --quick's presets for every option not given. */
export function resolve(cmd) {
  const out = { ...cmd.opts() };
  if (!out.quick) return out;
  for (const [name, quick] of cmd.presets ?? []) {
    if (quick !== undefined && cmd.getOptionValueSource(name) === 'default') out[name] = quick;
  }
  return out;
}

/** A list option with a default shown as the user would type it. */
export function listOption(flags, description, fallback) {
  return new Option(flags, description).argParser(list).default(fallback, fallback.join(','));
}
