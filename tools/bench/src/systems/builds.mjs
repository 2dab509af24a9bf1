// Builds of Fencer a run can measure: this tree's, and another checkout's
// (--baseline DIR: a tree before a change, built with `npx nx run-many -t
// build`), so that before and after are measured in one run, on the same
// machine moments.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CELL_NODE_MAIN, CELL_ROUTER_MAIN, CONTROL_PLANE_MAIN, SESSION_PROXY_MAIN } from '@fencer/fleet';

const APP_MAINS = {
  'cell-node': 'apps/cell-node/dist/main.js',
  'cell-router': 'apps/cell-router/dist/main.js',
  'session-proxy': 'apps/session-proxy/dist/main.js',
  'control-plane': 'apps/control-plane/dist/main.js',
};

/** This tree's build: its apps by @fencer/fleet's paths, its libraries by package name. */
export function thisBuild() {
  const mains = {
    'cell-node': CELL_NODE_MAIN,
    'cell-router': CELL_ROUTER_MAIN,
    'session-proxy': SESSION_PROXY_MAIN,
    'control-plane': CONTROL_PLANE_MAIN,
  };
  return {
    key: 'this',
    label: 'this build',
    root: path.resolve(path.dirname(CELL_NODE_MAIN), '../../..'),
    main: (app) => mains[app],
    /** An import specifier for a library's entry (`sub`: a subpath export such as 'node'). */
    lib: (pkg, sub) => `@fencer/${pkg}${sub ? `/${sub}` : ''}`,
  };
}

/**
 * Another checkout's build, from its root directory (or, as older runs
 * gave it, the path of its cell node's dist/main.js).
 */
export function otherBuild(given, label = 'baseline build') {
  const resolved = path.resolve(given);
  const root = resolved.endsWith(APP_MAINS['cell-node']) ? resolved.slice(0, -APP_MAINS['cell-node'].length - 1) : resolved;
  if (!existsSync(path.join(root, 'package.json'))) throw new Error(`--baseline ${given}: not a checkout (no package.json at ${root})`);
  return {
    key: 'baseline',
    label,
    root,
    main: (app) => path.join(root, APP_MAINS[app]),
    lib: (pkg, sub) => pathToFileURL(path.join(root, 'libs', pkg, 'dist', `${sub ?? 'index'}.js`)).href,
  };
}

/** Throws, naming the build command, unless every app in `apps` is built in `build`. */
export function requireBuilt(build, apps) {
  const missing = apps.filter((a) => !existsSync(build.main(a)));
  if (missing.length > 0)
    throw new Error(
      `${build.label}: ${missing.map((a) => build.main(a)).join(', ')} missing; run \`npx nx run-many -t build\` in ${build.root}`,
    );
}

/** The version in an app's package.json beside its dist, for the report. */
export function appVersion(build, app) {
  try {
    return JSON.parse(readFileSync(path.join(path.dirname(build.main(app)), '../package.json'), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

/**
 * Points a planned process (from @fencer/fleet's plans) at `build`'s app
 * main. A build from before the TCP peer transport does not know
 * --peer-listen; the flag is dropped for it.
 */
export function useBuild(planned, build, app) {
  if (build.key === 'this') return planned;
  const main = build.main(app);
  planned.argv[1] = main;
  planned.cwd = build.root;
  const config = path.join(path.dirname(main), 'config.js');
  const at = planned.argv.indexOf('--peer-listen');
  if (at >= 0 && existsSync(config) && !readFileSync(config, 'utf8').includes('--peer-listen')) planned.argv.splice(at, 2);
  return planned;
}

/** Builds one nx project of this tree (and what it depends on), quietly; the micro-benchmark suites measure its dist. */
export function buildProject(project) {
  execFileSync('npx', ['nx', 'build', project, '--output-style=static', '--skip-sync'], {
    cwd: thisBuild().root,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
