#!/usr/bin/env node
// `npm start`: builds every project, then runs the local fleet launcher in
// the foreground (arguments pass through, e.g. `npm start -- --cells 3 --replicas 3 --proxies 1
// --control-planes 3`; see tools/fleet/launch.mjs --help).
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const build = spawnSync(path.join(root, 'node_modules/.bin/nx'), ['run-many', '-t', 'build', '--output-style=static'], {
  cwd: root,
  stdio: 'inherit',
});
if (build.status !== 0) {
  console.error('fencer: the build failed; see above.');
  process.exit(build.status ?? 1);
}
const launcher = spawn(process.execPath, [path.join(root, 'tools/fleet/launch.mjs'), ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
});
// Ctrl-C reaches the launcher too (same process group); a SIGTERM sent to
// this process alone is passed on. Either way the launcher stops the fleet.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => launcher.kill('SIGTERM'));
launcher.on('exit', (code) => process.exit(code ?? 0));
