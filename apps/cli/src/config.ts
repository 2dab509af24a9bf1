/**
 * Where the CLI finds the service: --endpoints, then FENCER_ENDPOINTS, then a
 * fleet description (--fleet, FENCER_FLEET, or .fencer/fleet.json in the
 * working directory or any parent), the file `npm start` writes: its
 * `lockService` array lists the lock endpoints (the routers), `proxies[]`
 * the session proxies and `cells[].replicas[]` the admin addresses.
 * KeepAlive goes to the proxies: FENCER_PROXIES, else the fleet file's
 * `proxies` when the endpoints came from that file, else the endpoints.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { checkAddress } from '@fencer/client';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** A command line that names something that is not there (e.g. --cell of no replica): exit 64, the message on stderr. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface EndpointSources {
  readonly endpoints?: string | undefined;
  readonly fleet?: string | undefined;
}

export interface ReplicaAdmin {
  readonly id: string;
  readonly admin: string;
  readonly cellId: string;
}

interface FleetJson {
  lockService?: unknown;
  proxies?: unknown;
  cells?: { id?: unknown; replicas?: { id?: unknown; admin?: unknown }[] }[];
}

function splitList(text: string, what: string): string[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new ConfigError(`${what} is empty: give host:port[,host:port…]`);
  try {
    return items.map(checkAddress);
  } catch (e) {
    throw new ConfigError(`${what}: ${(e as Error).message}`);
  }
}

/** The fleet.json to use: explicit, from the environment, or found upward from cwd. */
export function findFleetFile(
  sources: EndpointSources,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): string | undefined {
  const explicit = sources.fleet ?? env['FENCER_FLEET'];
  if (explicit) return path.resolve(cwd, explicit);
  for (let dir = path.resolve(cwd), i = 0; i < 64; i++) {
    const candidate = path.join(dir, '.fencer', 'fleet.json');
    if (existsSync(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return undefined;
}

function readFleet(file: string): FleetJson {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as FleetJson;
  } catch (e) {
    throw new ConfigError(`cannot read the fleet description ${file}: ${(e as Error).message}`);
  }
}

const NO_ENDPOINTS =
  'no endpoints: pass --endpoints host:port[,…], set FENCER_ENDPOINTS, or start a local fleet with `npm start` (it writes .fencer/fleet.json)';

export function resolveEndpoints(
  sources: EndpointSources,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): { endpoints: string[]; proxies: string[]; source: string } {
  const proxiesFromEnv = env['FENCER_PROXIES'] ? splitList(env['FENCER_PROXIES'], 'FENCER_PROXIES') : undefined;
  if (sources.endpoints !== undefined)
    return { endpoints: splitList(sources.endpoints, '--endpoints'), proxies: proxiesFromEnv ?? [], source: '--endpoints' };
  const fromEnv = env['FENCER_ENDPOINTS'];
  if (fromEnv) return { endpoints: splitList(fromEnv, 'FENCER_ENDPOINTS'), proxies: proxiesFromEnv ?? [], source: 'FENCER_ENDPOINTS' };
  const file = findFleetFile(sources, env, cwd);
  if (!file) throw new ConfigError(NO_ENDPOINTS);
  const fleet = readFleet(file);
  if (!Array.isArray(fleet.lockService) || fleet.lockService.length === 0 || !fleet.lockService.every((x) => typeof x === 'string')) {
    throw new ConfigError(`${file} has no "lockService" list of host:port endpoints`);
  }
  return {
    endpoints: splitList((fleet.lockService as string[]).join(','), file),
    proxies: proxiesFromEnv ?? fleetProxies(fleet, file),
    source: file,
  };
}

/** fleet.json's `proxies`: host:port strings or objects with a `grpc` address; absent means none. */
function fleetProxies(fleet: FleetJson, file: string): string[] {
  if (fleet.proxies === undefined) return [];
  if (!Array.isArray(fleet.proxies)) throw new ConfigError(`${file}: "proxies" must be a list`);
  const list = fleet.proxies.map((p: unknown) =>
    typeof p === 'string' ? p : typeof p === 'object' && p !== null ? (p as { grpc?: unknown }).grpc : undefined,
  );
  if (!list.every((a): a is string => typeof a === 'string'))
    throw new ConfigError(`${file}: every entry of "proxies" needs a host:port ("grpc")`);
  return list.length === 0 ? [] : splitList(list.join(','), `${file} proxies`);
}

/** Admin addresses of every replica: --admin, FENCER_ADMIN_ENDPOINTS, or the fleet description's cells. */
export function resolveAdminEndpoints(
  admin: string | undefined,
  sources: EndpointSources,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): ReplicaAdmin[] {
  const list = admin ?? env['FENCER_ADMIN_ENDPOINTS'];
  if (list)
    return splitList(list, admin !== undefined ? '--admin' : 'FENCER_ADMIN_ENDPOINTS').map((a) => ({ id: a, admin: a, cellId: '' }));
  const file = findFleetFile(sources, env, cwd);
  if (!file)
    throw new ConfigError(
      'no admin endpoints: pass --admin host:port[,…], set FENCER_ADMIN_ENDPOINTS, or run a local fleet (.fencer/fleet.json)',
    );
  const fleet = readFleet(file);
  const out: ReplicaAdmin[] = [];
  for (const cell of fleet.cells ?? []) {
    for (const r of cell.replicas ?? []) {
      if (typeof r.admin !== 'string') continue;
      out.push({
        id: typeof r.id === 'string' ? r.id : r.admin,
        admin: checkAddress(r.admin),
        cellId: typeof cell.id === 'string' ? cell.id : '',
      });
    }
  }
  if (out.length === 0) throw new ConfigError(`${file} lists no replica with an "admin" address under cells[].replicas[]`);
  return out;
}
