/**
 * @fencer/service/testing: certificates for tests of mutual TLS, made by the
 * repository's development CA script (tools/scripts/dev-ca.mjs, which runs
 * `openssl`). `openssl` missing: `opensslMissing` says so, for a test to skip
 * with that reason (and fail under CI=true, where .ci/run installs it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TlsPaths } from './tls.js';

/** The repository's root: the nearest folder above this file holding nx.json. */
function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'nx.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the repository root (nx.json) above @fencer/service');
    dir = up;
  }
  return dir;
}

/** Why TLS tests cannot run here (no `openssl` command), or undefined when they can. */
export function opensslMissing(): string | undefined {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'needs the openssl command (Debian package openssl)';
  }
}

/** What a test certificate names: a replica of a cell, or a holder of another kind. */
export type TestHolder =
  | { readonly name: string; readonly cell: string }
  | { readonly name: string; readonly kind: 'router' | 'proxy' | 'control-plane' | 'operator' };

/**
 * Issues a certificate for each holder under `dir` (one CA per folder, made
 * on first use) and returns each one's paths. `days: 0` makes certificates
 * whose validity ends the second they are made (the expired case).
 */
export function issueTestCerts(dir: string, holders: readonly TestHolder[], opts: { days?: number } = {}): Record<string, TlsPaths> {
  const args = ['--dir', dir, '--days', String(opts.days ?? 30)];
  for (const h of holders) {
    if ('cell' in h) args.push('--cell', `${h.cell}=${h.name}`);
    else args.push(`--${h.kind}`, h.name);
  }
  execFileSync(process.execPath, [path.join(repoRoot(), 'tools/scripts/dev-ca.mjs'), ...args], { stdio: 'pipe' });
  const out: Record<string, TlsPaths> = {};
  for (const h of holders)
    out[h.name] = { cert: path.join(dir, `${h.name}.crt`), key: path.join(dir, `${h.name}.key`), ca: path.join(dir, 'ca.crt') };
  return out;
}
