/**
 * The dashboard as files a server can hand out: the page (HTML with its
 * styles inline and an import map), the app's ES modules compiled from
 * web/ into dist/ui, and Preact's own ES module builds out of its package.
 * Everything is read once into memory; the page fetches nothing from
 * anywhere but the server that sent it (docs/decisions/0023-the-dashboard.md).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PAGE_STYLES } from './styles.js';

export * from './views.js';

/** Where the page's files are served from. */
export const ASSET_PREFIX = '/ui/';
/** The app's entry module, under ASSET_PREFIX. */
const ENTRY = 'main.js';

export interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
};

/** Preact's module builds, by the specifier the app imports them with (the import map's keys). */
const VENDOR: Record<string, string> = {
  preact: 'dist/preact.mjs',
  'preact/hooks': 'hooks/dist/hooks.mjs',
  'preact/jsx-runtime': 'jsx-runtime/dist/jsxRuntime.mjs',
};

/** dist/ui: one level above this file both in src/ (tests) and dist/ (builds). */
function uiDir(): string {
  return fileURLToPath(new URL('../dist/ui/', import.meta.url));
}

function listModules(dir: string, under = ''): string[] {
  return readdirSync(path.join(dir, under), { withFileTypes: true }).flatMap((e) => {
    const rel = path.posix.join(under, e.name);
    if (e.isDirectory()) return listModules(dir, rel);
    return e.name.endsWith('.js') ? [rel] : [];
  });
}

function vendorUrl(specifier: string): string {
  return `${ASSET_PREFIX}vendor/${specifier.replace('/', '-')}.mjs`;
}

/**
 * Every asset by its URL path. Throws when the app was not built (`nx build dashboard-ui`), so a server
 * without its page fails at start, not at the first visit.
 */
export function dashboardAssets(): ReadonlyMap<string, Asset> {
  const assets = new Map<string, Asset>();
  const dir = uiDir();
  for (const rel of listModules(dir)) assets.set(`${ASSET_PREFIX}${rel}`, { type: TYPES['.js']!, body: readFileSync(path.join(dir, rel)) });
  if (!assets.has(`${ASSET_PREFIX}${ENTRY}`)) throw new Error(`the dashboard is not built: no ${ENTRY} under ${dir}`);
  const preactRoot = path.dirname(createRequire(import.meta.url).resolve('preact/package.json'));
  for (const [specifier, file] of Object.entries(VENDOR))
    assets.set(vendorUrl(specifier), { type: TYPES['.mjs']!, body: readFileSync(path.join(preactRoot, file)) });
  return assets;
}

/**
 * The page: its shell paints before any script runs (a heading and an empty state), then the app takes over.
 * With `auth`, the page asks for a token before it opens the stream (a request bound to fail would log an error).
 */
export function dashboardPage(options: { auth: boolean }): string {
  const imports = Object.fromEntries(Object.keys(VENDOR).map((s) => [s, vendorUrl(s)]));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="fencer-auth" content="${options.auth ? 'required' : 'off'}">
<title>Fencer fleet</title>
<link rel="icon" href="data:,">
<style>${PAGE_STYLES}</style>
<script type="importmap">${JSON.stringify({ imports })}</script>
<script type="module" src="${ASSET_PREFIX}${ENTRY}"></script>
</head>
<body>
<div id="app"><header><h1>Fencer fleet</h1><p class="status">Connecting…</p></header></div>
</body>
</html>
`;
}
