// The package graph's rules (docs/decisions/0018-package-layers.md), as
// functions over a workspace folder, so that `check-graph.mjs` runs them on
// the tree and a test runs them on a copy with a planted import.
//
// - Apps import only libs: no app depends on (package.json) or imports
//   another app, in its sources or its tests.
// - Libs import no app.
// - libs/base depends on no other project.
// - Every import of a workspace package goes through its public entry points
//   (the `exports` of its package.json): no `@fencer/x/src/...`, no relative
//   path that leaves the importing package.
// - No dependency cycle between projects (package.json dependencies and
//   imports together).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const KIND_OF_FOLDER = { apps: 'app', libs: 'lib', tools: 'tool' };
/** Folders of a package that hold code (vite.config.* and build output are not scanned). */
const CODE_FOLDERS_SKIPPED = new Set(['node_modules', 'dist', 'out-tsc', '.nx', 'gen']);
const CODE_FILE = /\.(ts|mts|mjs|js)$/;
const DECLARATION_FILE = /\.d\.(ts|mts)$/;
/** Files a package may have that are tooling configuration, not code of the package. */
const CONFIG_FILE = /^(vite|vitest|eslint)\.config\./;
/**
 * Import and export statements at the start of a line (so a specifier quoted
 * inside a string or a comment is not one), `import('x')` and `require('x')`.
 */
const IMPORTS = [
  /^\s*(?:import|export)\s+(?:type\s+)?(?:\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+(?:\s*,\s*\{[^}]*\})?)\s*from\s*['"]([^'"]+)['"]/gm,
  /^\s*import\s*['"]([^'"]+)['"]/gm,
  /\b(?:import|require)\(\s*['"]([^'"]+)['"]\s*\)/g,
];

/** Every workspace package: { name, dir (relative), kind, exports: Set of subpaths, deps: Set of names }. */
export function workspacePackages(root) {
  const out = [];
  for (const [folder, kind] of Object.entries(KIND_OF_FOLDER)) {
    const base = path.join(root, folder);
    if (!existsSync(base)) continue;
    for (const entry of readdirSync(base).sort()) {
      const file = path.join(base, entry, 'package.json');
      if (!existsSync(file)) continue;
      const pkg = JSON.parse(readFileSync(file, 'utf8'));
      const deps = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})]);
      const exports = new Set(Object.keys(pkg.exports ?? { '.': null }));
      out.push({
        name: pkg.name,
        dir: `${folder}/${entry}`,
        kind,
        exports,
        deps,
        runtimeDeps: new Set(Object.keys(pkg.dependencies ?? {})),
      });
    }
  }
  return out;
}

function codeFiles(dir, found = []) {
  for (const entry of readdirSync(dir)) {
    if (CODE_FOLDERS_SKIPPED.has(entry)) continue;
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) codeFiles(full, found);
    else if (CODE_FILE.test(entry) && !DECLARATION_FILE.test(entry) && !CONFIG_FILE.test(entry)) found.push(full);
  }
  return found;
}

/** Every import specifier in a package's code: [{ file (relative to root), specifier }]. */
export function importsOf(root, pkg) {
  const out = [];
  for (const file of codeFiles(path.join(root, pkg.dir))) {
    const text = readFileSync(file, 'utf8');
    for (const pattern of IMPORTS) for (const m of text.matchAll(pattern)) out.push({ file: path.relative(root, file), specifier: m[1] });
  }
  return out;
}

/** The workspace package a bare specifier names, and the subpath it asks for ('.' for the main entry). */
function splitSpecifier(specifier, byName) {
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const pkg = byName.get(name);
  if (!pkg) return undefined;
  const rest = specifier.slice(name.length);
  return { pkg, subpath: rest === '' ? '.' : `.${rest}` };
}

function describe(pkg) {
  return `${pkg.dir} (${pkg.name})`;
}

/** Edges between workspace packages, each with the first place that makes it: Map<from dir, Map<to dir, where>>. */
function edgesOf(root, packages, problems) {
  const byName = new Map(packages.map((p) => [p.name, p]));
  const edges = new Map(packages.map((p) => [p.dir, new Map()]));
  for (const pkg of packages) {
    const out = edges.get(pkg.dir);
    for (const dep of pkg.deps) {
      const target = byName.get(dep);
      if (target && target !== pkg && !out.has(target.dir)) out.set(target.dir, `${pkg.dir}/package.json`);
    }
    for (const { file, specifier } of importsOf(root, pkg)) {
      if (specifier.startsWith('.')) {
        const resolved = path.relative(root, path.resolve(root, path.dirname(file), specifier));
        if (!resolved.startsWith(`${pkg.dir}/`))
          problems.push(`${file} imports "${specifier}", a path outside ${pkg.dir}: import the package's public entry instead`);
        continue;
      }
      const hit = splitSpecifier(specifier, byName);
      if (!hit || hit.pkg === pkg) continue;
      if (!hit.pkg.exports.has(hit.subpath))
        problems.push(
          `${file} imports "${specifier}", which is not a public entry of ${describe(hit.pkg)}: use one of ${[...hit.pkg.exports].join(', ')}`,
        );
      if (!out.has(hit.pkg.dir)) out.set(hit.pkg.dir, file);
    }
  }
  return edges;
}

function layerProblems(packages, edges) {
  const byDir = new Map(packages.map((p) => [p.dir, p]));
  const problems = [];
  for (const pkg of packages) {
    for (const [targetDir, where] of edges.get(pkg.dir)) {
      const target = byDir.get(targetDir);
      if (pkg.dir === 'libs/base') problems.push(`libs/base depends on ${describe(target)} (${where}); it must depend on nothing`);
      if (target.kind !== 'app') continue;
      if (pkg.kind === 'app')
        problems.push(
          `app ${describe(pkg)} depends on app ${describe(target)} (${where}): apps import only libs; move what they share into a lib`,
        );
      if (pkg.kind === 'lib') problems.push(`lib ${describe(pkg)} depends on app ${describe(target)} (${where}): libs import no app`);
    }
  }
  return problems;
}

function cycleProblems(packages, edges) {
  const problems = [];
  const state = new Map();
  const stack = [];
  const visit = (dir) => {
    state.set(dir, 'open');
    stack.push(dir);
    for (const next of edges.get(dir).keys()) {
      if (state.get(next) === 'open') problems.push(`cycle: ${[...stack.slice(stack.indexOf(next)), next].join(' → ')}`);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(dir, 'done');
  };
  for (const p of packages) if (!state.has(p.dir)) visit(p.dir);
  return problems;
}

/** Every broken rule in the workspace at `root`, one sentence each that names the package and the file. */
export function graphProblems(root) {
  const packages = workspacePackages(root);
  const problems = [];
  const edges = edgesOf(root, packages, problems);
  return [...problems, ...layerProblems(packages, edges), ...cycleProblems(packages, edges)];
}

/** The packages and their edges, for a summary line. */
export function graphSummary(root) {
  const packages = workspacePackages(root);
  const edges = edgesOf(root, packages, []);
  const count = (kind) => packages.filter((p) => p.kind === kind).length;
  const edgeCount = [...edges.values()].reduce((n, m) => n + m.size, 0);
  return `${packages.length} packages (${count('app')} apps, ${count('lib')} libs, ${count('tool')} tools), ${edgeCount} edges`;
}
