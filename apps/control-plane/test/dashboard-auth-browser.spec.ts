/**
 * Goal: with auth on, the dashboard asks for a token before it shows
 * anything; an unknown token is refused with a reason on the form; a tenant
 * token shows that tenant only (no fleet, no other tenant, no move form);
 * the admin token shows the fleet and every tenant. Every control has an
 * accessible name, and the console stays clean but for the refused token's
 * 401.
 * Method: the real app with auth on, on a one-member meta group and fake
 * cells (support/harness.ts), listening on 127.0.0.1 port 0; Debian's
 * chromium through playwright-core (skipped and said so without it; CI
 * installs it, see .ci/run). Each sign-in is a new tab, since the page keeps
 * its token per tab. Screenshots go to .reports/dashboard/.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './support/harness.js';
import { root } from './support/instances.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const SHOTS = path.join(root, '.reports/dashboard');
const ADMIN = 'dashboard-auth-admin-token';

let h: Harness;
let url = '';
let dir = '';
let browser: BrowserContext | undefined;
let northToken = '';
const consoleErrors: string[] = [];

async function createTenant(namespace: string, cell: string): Promise<string> {
  const res = await fetch(`${url}/v1/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ namespace, cell, quotas: { maxSessions: 5 } }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { token: string }).token;
}

beforeAll(async () => {
  if (!haveChromium) return;
  h = await startHarness({ adminToken: ADMIN });
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  northToken = await createTenant('north', 'cell-1');
  await createTenant('south', 'cell-2');
  dir = mkdtempSync(path.join(tmpdir(), 'fencer-dashboard-auth-'));
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launchPersistentContext(path.join(dir, 'chromium'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function signIn(token: string): Promise<Page> {
  const page = await browser!.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  await page.goto(url);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: 10_000 });
  const tree = await page.locator('body').ariaSnapshot();
  expect(tree).toContain('textbox "Token"');
  expect(tree).toContain('button "Sign in"');
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  return page;
}

describe('the dashboard with auth on (needs Debian chromium)', () => {
  it.skipIf(!haveChromium)('refuses an unknown token on the form, with the reason', async () => {
    const page = await signIn('fencer_tenant_not-a-real-one');
    await page.getByText('this token is not valid').waitFor({ timeout: 10_000 });
    await page.screenshot({ path: path.join(SHOTS, '10-auth-refused.png'), fullPage: true });
    await page.close();
    // The refused stream's 401 is the one error the console may show.
    expect(consoleErrors.filter((e) => !/status of 401/.test(e))).toEqual([]);
    consoleErrors.length = 0;
  });

  it.skipIf(!haveChromium)('shows a tenant token its own tenant only: no fleet, no other tenant, no move form', async () => {
    const page = await signIn(northToken);
    await page.getByText('tenant north').waitFor({ timeout: 10_000 });
    await page.locator('[data-tenant="north"]').waitFor();
    expect(await page.locator('[data-tenant]').count()).toBe(1);
    expect(await page.getByRole('heading', { name: 'Fleet', exact: true }).count()).toBe(0);
    expect(await page.getByRole('heading', { name: 'Move a tenant' }).count()).toBe(0);
    await page.screenshot({ path: path.join(SHOTS, '11-auth-tenant.png'), fullPage: true });
    await page.close();
    expect(consoleErrors).toEqual([]);
  });

  it.skipIf(!haveChromium)('shows the admin token the fleet and every tenant', async () => {
    const page = await signIn(ADMIN);
    await page.getByText('admin view').waitFor({ timeout: 10_000 });
    await page.getByRole('heading', { name: 'Fleet', exact: true }).waitFor();
    await page.locator('[data-tenant="south"]').waitFor();
    expect(await page.locator('[data-tenant]').count()).toBe(2);
    await page.getByRole('heading', { name: 'Move a tenant' }).waitFor();
    await page.screenshot({ path: path.join(SHOTS, '12-auth-admin.png'), fullPage: true });
    await page.close();
    expect(consoleErrors).toEqual([]);
  });
});
