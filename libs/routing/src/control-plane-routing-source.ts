/**
 * The routing table from the control plane (`--control-plane URL[,URL...]`):
 * the contract's long poll `GET /v1/routing?sinceVersion=&waitMs=`, with
 * the cells' replica addresses from `GET /v1/fleet`; auto-tenants is
 * `POST /v1/tenants`. The URLs are instances of one meta group, followed one
 * at a time (control-plane-instances.ts): a fault of the one followed moves
 * the source to the next, and while a long poll is parked on an instance
 * its `GET /v1/health` is asked every few seconds, so a hung instance is
 * given up at once. While no instance answers, the last table keeps
 * serving.
 */
import { FencerError } from '@fencer/base';
import { EMPTY_TABLE, parseCells, parseRoutes, type RoutingTable } from '@fencer/contract';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { FollowedInstance, InstanceFault, parseControlPlaneUrls, probeWhileParked } from './control-plane-instances.js';
import { AdoptingSource, sleep, type RoutingSource } from './routing-source.js';

export interface ControlPlaneOptions {
  /** Base URL of the control plane: one, or the instances of its meta group (an array or a comma-separated list), followed in turn. */
  readonly baseUrl: string | readonly string[];
  readonly logger: Logger;
  /** waitMs of each long poll (the contract allows up to 60,000). */
  readonly waitMs?: number;
  /** `Authorization: Bearer` token, when the control plane has auth on. */
  readonly token?: string;
  /** Where to register the gauge of the instance followed and the counter of switches (none: logs only). */
  readonly registry?: Registry;
  /**
   * While a long poll is parked on an instance and there are others to
   * follow, its /v1/health is asked this often, and an instance that gives
   * no HTTP answer (any status) within this long is hung: the poll is
   * dropped and the next instance followed. Default 5,000 ms.
   */
  readonly livenessProbeMs?: number;
}

/** A call that is not a long poll: the fleet, a plain routing read, a tenant creation. */
const CONTROL_PLANE_CALL_TIMEOUT_MS = 10_000;
const LIVENESS_PROBE_MS_DEFAULT = 5_000;
const LONG_POLL_WAIT_MS_DEFAULT = 30_000;
/** A failed long poll is tried again after a pause that doubles from min to max. */
const LONG_POLL_BACKOFF_MS_MIN = 250;
const LONG_POLL_BACKOFF_MS_MAX = 5_000;
/**
 * How often the tenants' rate limits are read (GET /v1/tenants): a quota
 * change does not bump the routing version, so the long poll never carries
 * one (docs/decisions/0020-tenant-quotas-and-rate-limits.md).
 */
export const TENANT_RATES_POLL_MS = 5_000;
/** After a tenant creation, how many refreshes wait for its route (pauses growing from 20 to 200 ms: about 9 s in all). */
const CREATED_ROUTE_POLLS_MAX = 50;

export class ControlPlaneRoutingSource extends AdoptingSource implements RoutingSource {
  private closed = false;
  private readonly abort = new AbortController();
  private cells = EMPTY_TABLE.cells;
  private rates: ReadonlyMap<string, number> = new Map();
  private readonly waitMs: number;
  private readonly livenessProbeMs: number;
  private readonly instances: FollowedInstance;

  constructor(private readonly opts: ControlPlaneOptions) {
    super();
    this.waitMs = opts.waitMs ?? LONG_POLL_WAIT_MS_DEFAULT;
    this.livenessProbeMs = opts.livenessProbeMs ?? LIVENESS_PROBE_MS_DEFAULT;
    const urls = typeof opts.baseUrl === 'string' ? parseControlPlaneUrls(opts.baseUrl) : [...opts.baseUrl];
    this.instances = new FollowedInstance(urls, opts.logger, opts.registry);
  }

  /** The base URL of the control-plane instance followed now. */
  following(): string {
    return this.instances.url;
  }

  private moveOn(from: number, fault: InstanceFault): void {
    this.instances.moveOn(from, fault, this.current.version);
  }

  /** GET on instance `at`; `hung`, when given, is aborted (with an InstanceFault) by the liveness probe. */
  private async get(path: string, timeoutMs: number, at: number, hung?: AbortSignal): Promise<unknown> {
    const url = new URL(path, this.instances.urls[at]);
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(timeoutMs), ...(hung ? [hung] : [])]);
    let res: Response;
    try {
      res = await fetch(url, { signal, headers: this.headers() });
    } catch (e) {
      if (hung?.aborted) throw hung.reason as InstanceFault;
      throw new InstanceFault(`GET ${url.href}: ${(e as Error).message}`);
    }
    if (res.status >= 500) {
      await res.body?.cancel();
      throw new InstanceFault(`GET ${url.href}: HTTP ${res.status}`);
    }
    if (!res.ok) throw new Error(`GET ${url.href}: HTTP ${res.status}`);
    try {
      return await res.json();
    } catch (e) {
      if (hung?.aborted) throw hung.reason as InstanceFault;
      // Bad JSON is the answer's fault; a body cut off is the instance's (it died or timed out mid-answer).
      if (e instanceof SyntaxError) throw new Error(`GET ${url.href}: ${e.message}`);
      throw new InstanceFault(`GET ${url.href}: ${(e as Error).message}`);
    }
  }

  private headers(): Record<string, string> {
    return this.opts.token ? { authorization: `Bearer ${this.opts.token}` } : {};
  }

  /**
   * One poll of instance `at`: routes (long poll when sinceVersion is given),
   * then the fleet's addresses if a route names a cell not known yet.
   */
  private async poll(sinceVersion: number | undefined, at: number): Promise<RoutingTable> {
    const q = sinceVersion === undefined ? '' : `?sinceVersion=${sinceVersion}&waitMs=${this.waitMs}`;
    const timeoutMs = sinceVersion === undefined ? CONTROL_PLANE_CALL_TIMEOUT_MS : this.waitMs + CONTROL_PLANE_CALL_TIMEOUT_MS;
    const probe =
      sinceVersion !== undefined && this.instances.urls.length > 1
        ? probeWhileParked(this.instances.urls[at]!, this.livenessProbeMs, this.headers())
        : undefined;
    let answer: unknown;
    try {
      answer = await this.get(`/v1/routing${q}`, timeoutMs, at, probe?.hung);
    } finally {
      probe?.stop();
    }
    const { version, routes } = parseRoutes(answer, 'GET /v1/routing');
    if ([...routes.values()].some((r) => !this.cells.has(r.cell)) || this.cells.size === 0) {
      const fleet = (await this.get('/v1/fleet', CONTROL_PLANE_CALL_TIMEOUT_MS, at)) as { cells?: unknown };
      this.cells = parseCells(fleet?.cells, 'GET /v1/fleet');
    }
    return this.adopt({ version, cells: this.cells, routes });
  }

  /** A plain (not long) poll, on the instance followed and then, after each fault, on the next: each instance at most once. */
  private async pollAny(): Promise<RoutingTable> {
    let fault: InstanceFault | undefined;
    for (let tried = 0; tried < this.instances.urls.length && !this.closed; tried++) {
      const at = this.instances.index;
      try {
        return await this.poll(undefined, at);
      } catch (e) {
        if (!(e instanceof InstanceFault)) throw e;
        fault = e;
        this.moveOn(at, e);
      }
    }
    throw fault ?? new Error('the routing source is closed');
  }

  async start(): Promise<void> {
    try {
      await this.pollAny();
      this.opts.logger.info({ controlPlane: this.following(), version: this.current.version }, 'following the control plane');
    } catch (e) {
      this.opts.logger.warn(
        { err: (e as Error).message, controlPlanes: this.instances.urls },
        'control plane unreachable; routing starts empty and keeps trying',
      );
    }
    void this.loop();
    void this.ratesLoop();
  }

  acquireRates(): ReadonlyMap<string, number> {
    return this.rates;
  }

  /** Reads the tenants' acquiresPerSecond from the instance followed, every TENANT_RATES_POLL_MS; a failed read keeps the last. */
  private async ratesLoop(): Promise<void> {
    while (!this.closed) {
      try {
        const answer = (await this.get('/v1/tenants', CONTROL_PLANE_CALL_TIMEOUT_MS, this.instances.index)) as { tenants?: unknown };
        this.rates = parseRates(answer?.tenants);
      } catch (e) {
        if (this.closed) return;
        this.opts.logger.debug({ err: (e as Error).message }, 'tenant rate limits not read; keeping the last');
      }
      await sleep(TENANT_RATES_POLL_MS);
    }
  }

  private async loop(): Promise<void> {
    let backoffMs = LONG_POLL_BACKOFF_MS_MIN;
    while (!this.closed) {
      const at = this.instances.index;
      try {
        await this.poll(this.current.version, at);
        backoffMs = LONG_POLL_BACKOFF_MS_MIN;
      } catch (e) {
        if (this.closed) return;
        if (e instanceof InstanceFault && this.instances.urls.length > 1) this.moveOn(at, e);
        else
          this.opts.logger.warn(
            { err: (e as Error).message, version: this.current.version },
            'routing long poll failed; serving from the last table',
          );
        await sleep(backoffMs);
        backoffMs = Math.min(LONG_POLL_BACKOFF_MS_MAX, backoffMs * 2);
      }
    }
  }

  async refresh(): Promise<RoutingTable> {
    try {
      this.cells = new Map(); // re-read the addresses too: a cell's replicas may have changed
      return await this.pollAny();
    } catch {
      return this.current;
    }
  }

  /**
   * POST /v1/tenants on the instance followed, and on the next after each
   * fault (each instance at most once). A POST that got no answer may have
   * been applied; sending it again elsewhere is safe because the contract
   * makes every write idempotent under its Idempotency-Key (kept in the meta
   * group's log, so any instance replays the first answer), and a namespace
   * is created at most once anyway (409 TENANT_EXISTS, taken as success).
   */
  private async postTenant(namespace: string): Promise<Response> {
    let lastError = '';
    for (let tried = 0; tried < this.instances.urls.length; tried++) {
      const at = this.instances.index;
      const url = new URL('/v1/tenants', this.instances.urls[at]);
      const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(CONTROL_PLANE_CALL_TIMEOUT_MS)]);
      try {
        const res = await fetch(url, {
          method: 'POST',
          signal,
          headers: { 'content-type': 'application/json', 'idempotency-key': `auto-tenant-${namespace}`, ...this.headers() },
          body: JSON.stringify({ namespace }),
        });
        if (res.status < 500) return res;
        await res.body?.cancel();
        lastError = `${url.href} answered HTTP ${res.status}`;
      } catch (e) {
        lastError = `${url.href} did not answer: ${(e as Error).message}`;
      }
      if (this.closed) break;
      this.moveOn(at, new InstanceFault(`POST ${url.href}: ${lastError}`));
    }
    throw new FencerError(
      'NO_LEADER',
      `no control-plane instance created tenant "${namespace}" (${this.instances.urls.length} tried; last: ${lastError}); retry`,
    );
  }

  async createTenant(namespace: string): Promise<RoutingTable> {
    const res = await this.postTenant(namespace);
    if (res.status === 400) {
      const p = (await res.json().catch(() => ({}))) as { detail?: string };
      throw new FencerError('INVALID_NAME', `namespace "${namespace}" cannot be a tenant: ${p.detail ?? 'refused by the control plane'}`);
    }
    // 409: it exists already (another router created it first); either way it is routed soon.
    if (res.status !== 201 && res.status !== 409 && res.status !== 200) {
      await res.body?.cancel();
      throw new FencerError('NO_LEADER', `the control plane answered HTTP ${res.status} to the creation of tenant "${namespace}"; retry`);
    }
    await res.body?.cancel();
    for (let i = 0; i < CREATED_ROUTE_POLLS_MAX; i++) {
      const t = await this.refresh();
      if (t.routes.has(namespace)) return t;
      await sleep(20 * Math.min(i + 1, 10));
    }
    throw new FencerError('NO_LEADER', `tenant "${namespace}" was created but is not routed yet; retry`);
  }

  close(): void {
    this.closed = true;
    this.abort.abort();
  }
}

/** acquiresPerSecond of each tenant that has one, from GET /v1/tenants's list; anything malformed is skipped. */
export function parseRates(tenants: unknown): Map<string, number> {
  const rates = new Map<string, number>();
  if (!Array.isArray(tenants)) return rates;
  for (const t of tenants as { namespace?: unknown; quotas?: { acquiresPerSecond?: unknown } }[]) {
    const rate = t?.quotas?.acquiresPerSecond;
    if (typeof t?.namespace === 'string' && typeof rate === 'number' && Number.isFinite(rate) && rate >= 0) rates.set(t.namespace, rate);
  }
  return rates;
}
