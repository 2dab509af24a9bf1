/**
 * Goal: the page loads nothing that is not among the assets: every import
 * of every module (relative, or a bare name through the import map) names a
 * served file, and the page references only paths of its own server.
 * Method: the built assets (dist/ui, built before tests) and the page text,
 * with imports read by a regular expression over the compiled modules.
 */
import { describe, expect, it } from 'vitest';
import { ASSET_PREFIX, dashboardAssets, dashboardPage } from './index.js';

const IMPORT = /(?:^|[;\s])(?:import|export)\s*(?:[^'"]*?\bfrom\s*)?["']([^"']+)["']/g;

function importMap(page: string): Record<string, string> {
  return (JSON.parse(/<script type="importmap">(.*?)<\/script>/s.exec(page)![1]!) as { imports: Record<string, string> }).imports;
}

describe('dashboard assets', () => {
  it('resolve every import of every module to a served file', () => {
    const assets = dashboardAssets();
    const map = importMap(dashboardPage({ auth: false }));
    const unresolved: string[] = [];
    for (const [url, asset] of assets) {
      for (const m of asset.body.toString('utf8').matchAll(IMPORT)) {
        const spec = m[1]!;
        const target = spec.startsWith('.') ? new URL(spec, `http://x${url}`).pathname : map[spec];
        if (target === undefined || !assets.has(target)) unresolved.push(`${url} imports ${spec}`);
      }
    }
    expect(unresolved).toEqual([]);
    expect(assets.has(`${ASSET_PREFIX}main.js`)).toBe(true);
  });

  it('has a page whose scripts and import map point at this server only', () => {
    const page = dashboardPage({ auth: false });
    const map = importMap(page);
    expect(Object.keys(map).sort()).toEqual(['preact', 'preact/hooks', 'preact/jsx-runtime']);
    for (const target of Object.values(map)) expect(target.startsWith(ASSET_PREFIX)).toBe(true);
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(page).toContain(`<script type="module" src="${ASSET_PREFIX}main.js">`);
    expect(page).toContain('<meta name="fencer-auth" content="off">');
    expect(dashboardPage({ auth: true })).toContain('<meta name="fencer-auth" content="required">');
  });
});
