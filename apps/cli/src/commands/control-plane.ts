/**
 * `fencer tenants create|list|get|delete|quota|move`, `fencer moves`, `fencer routing`,
 * `fencer fleet status` and `fencer snapshots …` (snapshots.ts): the control plane's HTTP API (apps/control-plane)
 * as tables, or JSON with --json. The URL comes from --control-plane, then
 * $FENCER_CONTROL_PLANE, then fleet.json's `controlPlane.urls`; each URL is
 * tried in turn (any instance forwards to the meta group's leader). The
 * bearer token comes from --token, then $FENCER_TOKEN, then the
 * `admin-token` file beside fleet.json when there is one. An https URL of a
 * `--secure` fleet is verified against --tls-ca (else $FENCER_TLS_CA), else
 * the system's CAs.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { Agent, fetch as undiciFetch } from 'undici';
import { ConfigError, findFleetFile, type EndpointSources } from '../config.js';
import { EXIT } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { tlsFilesOf, type CliRun, type SecurityFlags } from '../run-context.js';
import { addSnapshotCommands } from './snapshots.js';
import { addMoveCommands, addTenantMove } from './moves.js';

interface CpOptions extends EndpointSources, SecurityFlags {
  json?: boolean;
  timeout: number;
  controlPlane?: string;
}

export interface Ctx {
  readonly urls: readonly string[];
  readonly token: string | undefined;
  readonly json: boolean;
  readonly timeoutMs: number;
  readonly io: CliIo;
  /** HTTPS trusting the fleet's CA (--tls-ca), presenting --tls-cert/--tls-key when given; the global fetch without. */
  readonly tls?: Agent;
}

/** The HTTPS agent of a `--secure` fleet's CA (and an operator's pair when given), or undefined without --tls-ca / $FENCER_TLS_CA. */
export function httpsAgentOf(env: Readonly<Record<string, string | undefined>>, flags: SecurityFlags): Agent | undefined {
  const files = tlsFilesOf(env, flags);
  if (files === undefined) return undefined;
  return new Agent({ connect: { ca: files.ca, ...(files.cert && files.key ? { cert: files.cert, key: files.key } : {}) } });
}

/** The control plane answered with a problem document, or no instance answered. */
export class CpError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export function resolveControlPlane(
  o: CpOptions,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): { urls: string[]; token: string | undefined } {
  const fleetFile = findFleetFile(o, env, cwd);
  let fleet: { controlPlane?: { urls?: unknown } } | undefined;
  if (fleetFile !== undefined && existsSync(fleetFile)) {
    try {
      fleet = JSON.parse(readFileSync(fleetFile, 'utf8'));
    } catch (e) {
      throw new ConfigError(`cannot read the fleet description ${fleetFile}: ${(e as Error).message}`);
    }
  }
  const listed = o.controlPlane ?? env['FENCER_CONTROL_PLANE'];
  const urls =
    listed !== undefined
      ? listed
          .split(',')
          .map((u) => u.trim())
          .filter(Boolean)
      : Array.isArray(fleet?.controlPlane?.urls)
        ? (fleet.controlPlane.urls as unknown[]).map(String)
        : [];
  if (urls.length === 0) {
    throw new ConfigError(
      'no control plane: pass --control-plane http://host:port[,…], set FENCER_CONTROL_PLANE, or start a local fleet that has one (fleet.json controlPlane.urls)',
    );
  }
  for (const u of urls)
    if (!/^https?:\/\/[^/\s]+\/?$/.test(u)) throw new ConfigError(`control-plane URL "${u}" must look like http://host:port`);
  const tokenFile = fleetFile !== undefined ? path.join(path.dirname(fleetFile), 'admin-token') : undefined;
  const token =
    o.token ??
    env['FENCER_TOKEN'] ??
    (tokenFile !== undefined && existsSync(tokenFile) ? readFileSync(tokenFile, 'utf8').trim() : undefined);
  return { urls: urls.map((u) => u.replace(/\/$/, '')), token };
}

/** One request, tried on each instance until one answers; a problem document becomes a CpError. */
export async function request(ctx: Ctx, method: string, urlPath: string, body?: unknown, idempotent = false): Promise<unknown> {
  const started = Date.now();
  const headers: Record<string, string> = {};
  if (ctx.token) headers['authorization'] = `Bearer ${ctx.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  // One key for every attempt: a retry after a lost answer gets the first answer, not a second write.
  if (idempotent) headers['idempotency-key'] = randomUUID();
  let last = 'no instance tried';
  for (let round = 0; Date.now() - started < ctx.timeoutMs; round++) {
    for (const base of ctx.urls) {
      let res: Pick<Response, 'ok' | 'status' | 'text'>;
      try {
        const init = {
          method,
          headers,
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(Math.max(1_000, ctx.timeoutMs)),
        };
        res = ctx.tls ? await undiciFetch(`${base}${urlPath}`, { ...init, dispatcher: ctx.tls }) : await fetch(`${base}${urlPath}`, init);
      } catch (e) {
        last = `${base}: ${(e as Error).message}`;
        continue;
      }
      const text = await res.text();
      const parsed = text === '' ? undefined : JSON.parse(text);
      if (res.ok) return parsed;
      const problem = parsed as { code?: string; detail?: string; title?: string } | undefined;
      last = `${problem?.code ?? res.status}: ${problem?.detail ?? problem?.title ?? text}`;
      if (res.status === 503) continue;
      throw new CpError(last, EXIT.ERROR);
    }
    await new Promise((r) => setTimeout(r, Math.min(1_000, 100 * 2 ** round)));
  }
  throw new CpError(`the control plane did not answer within ${ctx.timeoutMs} ms (${last})`, EXIT.UNAVAILABLE);
}

/** Left-aligned columns, two spaces apart. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

const positiveInt =
  (flag: string) =>
  (v: string): number => {
    if (!/^\d+$/.test(v) || Number(v) < 1) throw new InvalidArgumentError(`${flag} must be an integer >= 1, got "${v}"`);
    return Number(v);
  };
const rate = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new InvalidArgumentError(`--acquires-per-second must be a number >= 0, got "${v}"`);
  return n;
};

function quotaOptions(c: Command): Command {
  return c
    .addOption(new Option('--max-sessions <n>', 'live sessions the tenant may hold').argParser(positiveInt('--max-sessions')))
    .addOption(new Option('--max-locks <n>', 'locks the tenant may hold').argParser(positiveInt('--max-locks')))
    .addOption(new Option('--max-waiters <n>', 'queued waiters the tenant may have').argParser(positiveInt('--max-waiters')))
    .addOption(new Option('--acquires-per-second <rate>', 'acquire rate limit').argParser(rate));
}

function quotasOf(o: {
  maxSessions?: number;
  maxLocks?: number;
  maxWaiters?: number;
  acquiresPerSecond?: number;
}): Record<string, number> | undefined {
  const q: Record<string, number> = {};
  if (o.maxSessions !== undefined) q['maxSessions'] = o.maxSessions;
  if (o.maxLocks !== undefined) q['maxLocks'] = o.maxLocks;
  if (o.maxWaiters !== undefined) q['maxWaiters'] = o.maxWaiters;
  if (o.acquiresPerSecond !== undefined) q['acquiresPerSecond'] = o.acquiresPerSecond;
  return Object.keys(q).length > 0 ? q : undefined;
}

interface TenantBody {
  namespace: string;
  cell: string;
  owner?: string;
  createdAt: string;
  quotas?: Record<string, number>;
  moving?: boolean;
  token?: string;
}

const quotaText = (q: Record<string, number> | undefined): string =>
  q && Object.keys(q).length > 0
    ? Object.entries(q)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    : '-';
const tenantRow = (t: TenantBody): string[] => [
  t.namespace,
  t.cell,
  t.owner ?? '-',
  quotaText(t.quotas),
  t.moving ? 'moving' : 'active',
  t.createdAt,
];
const TENANT_HEADER = ['NAMESPACE', 'CELL', 'OWNER', 'QUOTAS', 'STATE', 'CREATED'];

/** Commander hands each action its own mix of arguments and options, then the command. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each action's arguments are typed where it is written
type ActionArgs = any[];
export type CpAction = (ctx: Ctx, ...args: ActionArgs) => Promise<void>;

/**
 * The commands of one group share their options' resolution and error handling: `action(body)` runs
 * the body with the control plane resolved from the command's options, and turns a CpError into its
 * message and exit code (anything else goes on to runCli).
 */
export function cpActions(run: CliRun): (body: CpAction) => (...args: ActionArgs) => Promise<void> {
  const { io } = run;
  const ctxOf = (cmd: Command): Ctx => {
    const g = cmd.optsWithGlobals<CpOptions>();
    const { urls, token } = resolveControlPlane(g, io.env, io.cwd);
    const tls = urls.some((u) => u.startsWith('https:')) ? httpsAgentOf(io.env, g) : undefined;
    return { urls, token, json: g.json === true, timeoutMs: g.timeout, io, ...(tls ? { tls } : {}) };
  };
  return (body) =>
    async (...args) => {
      const cmd = args[args.length - 1] as Command;
      const ctx = ctxOf(cmd);
      try {
        await body(ctx, ...args.slice(0, -1));
        run.setExitCode(EXIT.OK);
      } catch (e) {
        if (!(e instanceof CpError)) throw e;
        io.stderr(`fencer: ${e.message}\n`);
        run.setExitCode(e.exitCode);
      } finally {
        await ctx.tls?.close();
      }
    };
}

export const cpOptions = (c: Command): Command =>
  c
    .option(
      '--control-plane <urls>',
      'control-plane URLs, http://host:port[,…] (default: $FENCER_CONTROL_PLANE, then fleet.json controlPlane.urls)',
    )
    .option('--token <token>', 'bearer token (default: $FENCER_TOKEN, then admin-token beside fleet.json)');

export const out = (ctx: Ctx, json: unknown, human: string): void => ctx.io.stdout(ctx.json ? `${JSON.stringify(json)}\n` : human);

async function createTenant(ctx: Ctx, namespace: string, o: { cell?: string; owner?: string; maxSessions?: number }): Promise<void> {
  const quotas = quotasOf(o);
  const t = (await request(
    ctx,
    'POST',
    '/v1/tenants',
    { namespace, ...(o.cell ? { cell: o.cell } : {}), ...(o.owner ? { owner: o.owner } : {}), ...(quotas ? { quotas } : {}) },
    true,
  )) as TenantBody;
  out(ctx, t, `${table(TENANT_HEADER, [tenantRow(t)])}${t.token ? `token (shown once): ${t.token}\n` : ''}`);
}

async function changeQuotas(ctx: Ctx, namespace: string, o: Record<string, number>): Promise<void> {
  const quotas = quotasOf(o);
  if (quotas === undefined)
    throw new CpError('give at least one of --max-sessions, --max-locks, --max-waiters, --acquires-per-second', EXIT.USAGE);
  const t = (await request(ctx, 'PATCH', `/v1/tenants/${encodeURIComponent(namespace)}`, { quotas }, true)) as TenantBody;
  out(ctx, t, table(TENANT_HEADER, [tenantRow(t)]));
}

function addTenantCommands(program: Command, action: ReturnType<typeof cpActions>): void {
  const tenants = program.command('tenants').description('tenants and their namespaces (control plane)');
  cpOptions(
    quotaOptions(
      tenants
        .command('create')
        .description('create a tenant; its namespace is claimed by its cell (default: the cell with the fewest live sessions)')
        .argument('<namespace>', 'the tenant name, which is its namespace')
        .option('--cell <id>', 'the cell to place it on')
        .option('--owner <text>', 'who owns it, for operators'),
    ),
  ).action(action(createTenant));
  cpOptions(tenants.command('list').description('every tenant')).action(
    action(async (ctx) => {
      const { tenants: list } = (await request(ctx, 'GET', '/v1/tenants')) as { tenants: TenantBody[] };
      out(ctx, { tenants: list }, table(TENANT_HEADER, list.map(tenantRow)));
    }),
  );
  cpOptions(tenants.command('get').description('one tenant').argument('<namespace>')).action(
    action(async (ctx, namespace: string) => {
      const t = (await request(ctx, 'GET', `/v1/tenants/${encodeURIComponent(namespace)}`)) as TenantBody;
      out(ctx, t, table(TENANT_HEADER, [tenantRow(t)]));
    }),
  );
  cpOptions(
    tenants
      .command('delete')
      .description('delete a tenant and drop its namespace on its cell')
      .argument('<namespace>')
      .option('--force', 'also when it has live sessions (they are expired)'),
  ).action(
    action(async (ctx, namespace: string, o: { force?: boolean }) => {
      await request(ctx, 'DELETE', `/v1/tenants/${encodeURIComponent(namespace)}${o.force ? '?force=true' : ''}`, undefined, true);
      out(ctx, { deleted: namespace }, `deleted ${namespace}\n`);
    }),
  );
  cpOptions(
    quotaOptions(tenants.command('quota').description("change a tenant's quotas (the ones given; others stay)").argument('<namespace>')),
  ).action(action(changeQuotas));
  addTenantMove(tenants, action);
}

async function showRouting(ctx: Ctx): Promise<void> {
  const r = (await request(ctx, 'GET', '/v1/routing')) as {
    version: number;
    routes: { namespace: string; cell: string; state: string }[];
  };
  out(
    ctx,
    r,
    `version ${r.version}\n${table(
      ['NAMESPACE', 'CELL', 'STATE'],
      r.routes.map((x) => [x.namespace, x.cell, x.state]),
    )}`,
  );
}

interface FleetBody {
  routingVersion: number;
  cells: {
    id: string;
    leader?: string | null;
    term?: number;
    namespaces: string[];
    replicas: { id: string; grpc: string; role: string; term?: number; commitIndex?: number; lastSeenMs?: number }[];
  }[];
}

async function showFleet(ctx: Ctx): Promise<void> {
  const f = (await request(ctx, 'GET', '/v1/fleet')) as FleetBody;
  const rows = f.cells.flatMap((c) =>
    c.replicas.map((r) => [
      c.id,
      r.id,
      r.grpc,
      r.role,
      String(r.term ?? '-'),
      String(r.commitIndex ?? '-'),
      r.lastSeenMs === undefined ? '-' : `${r.lastSeenMs}ms`,
    ]),
  );
  const namespaces = f.cells.map((c) => `${c.id}: ${c.namespaces.length > 0 ? c.namespaces.join(', ') : '(none)'}`).join('\n');
  out(
    ctx,
    f,
    `routing version ${f.routingVersion}\n${table(['CELL', 'REPLICA', 'GRPC', 'ROLE', 'TERM', 'COMMIT', 'LAST SEEN'], rows)}\nnamespaces\n${namespaces}\n`,
  );
}

/** Adds tenants, routing and fleet, in the order `fencer --help` lists them. */
export function addControlPlaneCommands(program: Command, run: CliRun): void {
  const action = cpActions(run);
  addTenantCommands(program, action);
  addMoveCommands(program, action);
  cpOptions(program.command('routing').description('the routing table, namespace -> cell, with its version')).action(action(showRouting));
  const fleet = program.command('fleet').description('the whole fleet (control plane)');
  cpOptions(fleet.command('status').description('every cell, its leader and namespaces, and each replica as last seen')).action(
    action(showFleet),
  );
  addSnapshotCommands(program, action);
}
