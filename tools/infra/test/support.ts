/** Test support for tools/infra: the repository root, and finding a Debian tool (skipped with a reason, failed under CI). */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** The path of `tool` on PATH, or undefined. */
export function which(tool: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The tool a test needs, from Debian package `pkg`: its path, or undefined after saying it is skipped. Under CI=true a
 * missing tool is an error (.ci/run installs the package), so CI never goes green without the check.
 */
export function needTool(tool: string, pkg: string, spec: string): string | undefined {
  const found = which(tool);
  if (found !== undefined) return found;
  if (process.env['CI'] === 'true') throw new Error(`${spec}: ${tool} not found: CI=true needs the Debian package ${pkg}`);
  console.warn(`${spec}: skipped: needs ${tool} from Debian ${pkg} (apt-get install ${pkg}); .ci/run installs it`);
  return undefined;
}
