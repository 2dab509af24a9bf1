// The packages users install from npm, built from the workspace's compiled
// code: @fencer/client (libs/client) and @fencer/cli (apps/cli). Inside the
// workspace both depend on private libraries (@fencer/base, @fencer/protocol,
// ...); a published package cannot, so each is bundled: esbuild bundles the
// JavaScript (ESM, our libraries inside, third-party packages left as
// imports), rollup-plugin-dts bundles the declarations the same way. The
// package.json each gets lists as dependencies exactly the third-party
// packages the bundles import, at the versions the workspace pins.
// Run `npx nx build cli client` first (the nx target `packages:pack` does).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { rollup } from 'rollup';
import { dts } from 'rollup-plugin-dts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const NODE_ENGINE = '>=20.19';
const WORKSPACE_SCOPE = '@fencer/';

/** What each published package is made of: its workspace folder, entry points (name -> compiled file) and public subpaths. */
export const PACKAGES = [
  {
    name: '@fencer/client',
    dir: 'libs/client',
    entries: { index: 'dist/index.js', 'testing/index': 'dist/testing/index.js' },
    exports: { '.': 'index', './testing': 'testing/index' },
  },
  {
    name: '@fencer/cli',
    dir: 'apps/cli',
    entries: { index: 'dist/index.js', main: 'dist/main.js' },
    exports: { '.': 'index' },
    // bin/fencer.mjs loads ../dist/main.js, which is the bundled CLI in the package.
    bin: { fencer: 'bin/fencer.mjs' },
  },
];

/** "@scope/name/sub/path" -> "@scope/name"; "name/sub" -> "name". */
export function packageNameOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const isWorkspace = (id) => id.startsWith(WORKSPACE_SCOPE);
const isBare = (id) => !id.startsWith('.') && !path.isAbsolute(id);

/** Every version the workspace pins, by package name (root and each workspace package.json). */
function pinnedVersions() {
  const files = [path.join(ROOT, 'package.json')];
  for (const top of ['apps', 'libs', 'tools']) {
    for (const entry of readdirSync(path.join(ROOT, top))) {
      const file = path.join(ROOT, top, entry, 'package.json');
      if (existsSync(file)) files.push(file);
    }
  }
  const pins = new Map();
  for (const file of files) {
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    for (const [name, range] of Object.entries({ ...pkg.devDependencies, ...pkg.dependencies })) {
      if (!isWorkspace(name) && !pins.has(name)) pins.set(name, range);
    }
  }
  return pins;
}

/** The version of `name` a published package asks for: the workspace's pin, else the installed one. */
function versionFor(name, pins) {
  if (pins.has(name)) return pins.get(name);
  const installed = path.join(ROOT, 'node_modules', name, 'package.json');
  if (!existsSync(installed)) throw new Error(`${name} is imported by a bundle but neither pinned nor installed in the workspace`);
  return JSON.parse(readFileSync(installed, 'utf8')).version;
}

/** esbuild plugin: workspace packages are bundled; Node's built-ins and third-party packages stay imports, recorded in `seen`. */
function keepThirdPartyExternal(seen) {
  return {
    name: 'keep-third-party-external',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        if (isWorkspace(args.path)) return undefined;
        if (!isBuiltin(args.path)) seen.add(packageNameOf(args.path));
        return { path: args.path, external: true };
      });
    },
  };
}

function entryFiles(spec) {
  return Object.fromEntries(Object.entries(spec.entries).map(([name, file]) => [name, path.join(ROOT, spec.dir, file)]));
}

async function bundleJs(spec, outDir, thirdParty) {
  for (const file of Object.values(entryFiles(spec))) {
    if (!existsSync(file))
      throw new Error(`${path.relative(ROOT, file)} is missing: build first (npx nx build ${path.basename(spec.dir)})`);
  }
  await esbuild.build({
    entryPoints: entryFiles(spec),
    outdir: path.join(outDir, 'dist'),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    chunkNames: 'chunks/[name]-[hash]',
    // Conditions as Node resolves them, never the workspace's '@fencer/source': bundle what the workspace built.
    conditions: ['node', 'import', 'default'],
    sourcemap: false,
    logLevel: 'warning',
    plugins: [keepThirdPartyExternal(thirdParty)],
  });
}

/**
 * One declaration bundle per public entry point (a bin has none), each self-contained: rollup-plugin-dts refuses a shared
 * chunk whose types an entry names without exporting them (the client's API names a few protocol
 * types only through namespaces), and a type declared twice costs nothing at run time.
 */
async function bundleDeclarations(spec, outDir, thirdParty) {
  const files = entryFiles(spec);
  for (const name of Object.values(spec.exports)) {
    const bundle = await rollup({
      input: files[name].replace(/\.js$/, '.d.ts'),
      // Bare imports other than ours stay imports (and must be dependencies, or @types the user has, like @types/node).
      external: (id) => isBare(id) && !isWorkspace(id),
      // The workspace's compiler settings, resolving packages to what they built (not '@fencer/source').
      plugins: [dts({ respectExternal: true, tsconfig: path.join(ROOT, 'tsconfig.base.json'), compilerOptions: { customConditions: [] } })],
      onwarn: (warning) => {
        throw new Error(`rollup-plugin-dts: ${warning.message}`);
      },
    });
    const { output } = await bundle.write({ file: path.join(outDir, 'dist', `${name}.d.ts`), format: 'es' });
    await bundle.close();
    for (const chunk of output) {
      if (chunk.type !== 'chunk') continue;
      for (const id of chunk.imports) if (isBare(id) && !isBuiltin(id)) thirdParty.add(packageNameOf(id));
    }
  }
}

function exportsMap(spec) {
  return Object.fromEntries(
    Object.entries(spec.exports).map(([subpath, entry]) => [subpath, { types: `./dist/${entry}.d.ts`, default: `./dist/${entry}.js` }]),
  );
}

/** The package.json a published package carries: no workspace dependency, nothing private. */
export function publishedManifest(spec, source, dependencies) {
  const manifest = {
    name: spec.name,
    version: source.version,
    description: source.description,
    type: 'module',
    engines: { node: NODE_ENGINE },
    exports: { ...exportsMap(spec), './package.json': './package.json' },
    types: `./dist/${spec.exports['.']}.d.ts`,
    ...(spec.bin ? { bin: spec.bin } : {}),
    files: ['dist', ...(spec.bin ? ['bin'] : []), 'README.md'],
    dependencies,
  };
  return manifest;
}

/** Builds one package's folder under `outDir/<short name>`: bundles, declarations, bin, README, package.json. */
export async function buildPackage(spec, outDir) {
  const dir = path.join(outDir, packageNameOf(spec.name).split('/').pop());
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const thirdParty = new Set();
  await bundleJs(spec, dir, thirdParty);
  await bundleDeclarations(spec, dir, thirdParty);
  for (const file of Object.values(spec.bin ?? {})) cpSync(path.join(ROOT, spec.dir, file), path.join(dir, file));
  cpSync(path.join(ROOT, spec.dir, 'README.md'), path.join(dir, 'README.md'));
  const pins = pinnedVersions();
  const dependencies = Object.fromEntries([...thirdParty].sort().map((name) => [name, versionFor(name, pins)]));
  const source = JSON.parse(readFileSync(path.join(ROOT, spec.dir, 'package.json'), 'utf8'));
  writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(publishedManifest(spec, source, dependencies), null, 2)}\n`);
  return dir;
}

/** The environment for npm run from here: without the npm_* settings an enclosing `npm test` or `npx` passes down. */
export function cleanNpmEnv(env = process.env) {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !/^npm_/i.test(k)));
}

/** `npm pack` of a built package folder into `destination`; returns the tarball's path. */
export function npmPack(dir, destination) {
  mkdirSync(destination, { recursive: true });
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: dir,
    env: cleanNpmEnv(),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [{ filename }] = JSON.parse(out);
  return path.join(destination, filename);
}

/** Builds and packs every published package; returns their folders and tarballs. */
export async function packAll(outDir) {
  const packed = [];
  for (const spec of PACKAGES) {
    const dir = await buildPackage(spec, outDir);
    packed.push({ name: spec.name, dir, tarball: npmPack(dir, path.join(outDir, 'tarballs')) });
  }
  return packed;
}
