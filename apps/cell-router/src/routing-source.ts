/**
 * Where the router and the proxy get their routing table from, and how
 * auto-tenants creates a namespace. Two sources:
 *
 * - `FileRoutingSource` (`--routing FILE`): the file is read at start and
 *   again whenever it changes (polled by stat); a table is adopted only if
 *   its version is higher. A file that does not parse is logged and the last
 *   table kept. Auto-tenants without a control plane: the router places the
 *   namespace on the cell with the fewest namespaces and rewrites the file
 *   atomically (write a temporary file, fsync, rename) with version + 1,
 *   under an exclusive `FILE.lock` so that routers sharing one file do not
 *   lose each other's tenants.
 * - `ControlPlaneRoutingSource` (`--control-plane URL[,URL...]`): the
 *   contract's long poll `GET /v1/routing?sinceVersion=&waitMs=`, with the
 *   cells' replica addresses from `GET /v1/fleet`; auto-tenants is
 *   `POST /v1/tenants`. The URLs are instances of one meta group: any of
 *   them answers reads and forwards writes, and the routing version is the
 *   group's, so a poll can continue on another instance from the version in
 *   force. One instance is followed at a time; a fault of it (no answer, a
 *   timeout, a 5xx) moves the source to the next, round robin. While a
 *   long poll is parked on an instance, that instance's `GET /v1/health` is
 *   asked every few seconds: a process that is hung (stopped, or stuck)
 *   keeps its connections open and would hold the poll to its timeout, so
 *   one that does not answer the probe is given up at once. While no
 *   instance answers, the last table keeps serving.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, type Stats, statSync, unlinkSync, writeSync } from 'node:fs';
import { FencerError } from '@fencer/base';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ROUTING_FILE_BYTES_MAX } from './limits.js';
import { EMPTY_TABLE, leastLoadedCell, parseCells, parseRoutes, parseRoutingFile, routingFileJson, type RoutingTable } from './routing.js';

export interface RoutingSource {
  /** The newest table known. */
  table(): RoutingTable;
  /** Starts following the source; resolves once a first table is in (or the first attempt failed). */
  start(): Promise<void>;
  /** Asks the source now, for a caller that met NAMESPACE_NOT_HERE; resolves with the newest table. */
  refresh(): Promise<RoutingTable>;
  /** Auto-tenants: creates the namespace's tenant on the least-loaded cell; resolves with a table that routes it. */
  createTenant(namespace: string): Promise<RoutingTable>;
  /** Called with every newer table adopted. */
  onChange(listener: (t: RoutingTable) => void): void;
  close(): void;
}

abstract class BaseSource {
  protected current: RoutingTable = EMPTY_TABLE;
  private readonly listeners: ((t: RoutingTable) => void)[] = [];

  table(): RoutingTable {
    return this.current;
  }

  onChange(listener: (t: RoutingTable) => void): void {
    this.listeners.push(listener);
  }

  /** Adopts `t` if its version is newer; returns the table in force. */
  protected adopt(t: RoutingTable): RoutingTable {
    if (t.version > this.current.version) {
      this.current = t;
      for (const l of this.listeners) l(t);
    }
    return this.current;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class FileRoutingSource extends BaseSource implements RoutingSource {
  private writing: Promise<unknown> = Promise.resolve();
  /** The file's stat as last looked at; a poll that finds it different reloads. */
  private seen: Pick<Stats, 'ino' | 'size' | 'mtimeMs'> | undefined;
  private poller: NodeJS.Timeout | undefined;

  constructor(
    private readonly file: string,
    private readonly logger: Logger,
    private readonly pollMs = 200,
  ) {
    super();
  }

  private read(): RoutingTable {
    const size = statSync(this.file).size;
    if (size > ROUTING_FILE_BYTES_MAX) throw new Error(`${this.file} is larger than ${ROUTING_FILE_BYTES_MAX} bytes`);
    return parseRoutingFile(JSON.parse(readFileSync(this.file, 'utf8')) as unknown, this.file);
  }

  private reload(): RoutingTable {
    try {
      const before = this.current.version;
      const t = this.adopt(this.read());
      if (t.version > before) this.logger.info({ version: t.version, routes: t.routes.size, cells: t.cells.size }, 'routing table loaded');
    } catch (e) {
      this.logger.warn({ err: (e as Error).message, file: this.file }, 'routing file unreadable; serving from the last table');
    }
    return this.current;
  }

  /**
   * Stat is taken before the read, synchronously, so a write that lands
   * after start() returns always differs from what was seen (fs.watchFile
   * takes its first stat later, asynchronously, and missed such a write on
   * a loaded machine). A file caught half-written fails to parse and is
   * read again at the next poll, whose stat differs again.
   */
  async start(): Promise<void> {
    this.seen = statSync(this.file);
    this.current = this.read(); // a router must not start from a file it cannot read
    this.poller = setInterval(() => this.poll(), this.pollMs);
    this.poller.unref();
  }

  private poll(): void {
    let st: Stats;
    try {
      st = statSync(this.file);
    } catch {
      return; // gone for a moment (replaced by rename): the next poll looks again
    }
    const seen = this.seen;
    if (seen && st.ino === seen.ino && st.size === seen.size && st.mtimeMs === seen.mtimeMs) return;
    this.seen = st;
    this.reload();
  }

  refresh(): Promise<RoutingTable> {
    return Promise.resolve(this.reload());
  }

  createTenant(namespace: string): Promise<RoutingTable> {
    const run = this.writing.then(() => this.createLocked(namespace));
    this.writing = run.catch(() => undefined);
    return run;
  }

  private async createLocked(namespace: string): Promise<RoutingTable> {
    const lock = `${this.file}.lock`;
    const giveUpAt = Date.now() + 5_000;
    let fd: number | undefined;
    while (fd === undefined) {
      try {
        fd = openSync(lock, 'wx');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        // A lock older than the wait is left by a router that died mid-write.
        try {
          if (Date.now() - statSync(lock).mtimeMs > 5_000) unlinkSync(lock);
        } catch {
          /* gone meanwhile */
        }
        if (Date.now() > giveUpAt) throw new FencerError('NO_LEADER', `the routing file is locked by another router (${lock}); retry`);
        await sleep(20);
      }
    }
    try {
      closeSync(fd);
      const t = this.reload();
      if (t.routes.has(namespace)) return t;
      const cell = leastLoadedCell(t);
      if (cell === undefined)
        throw new FencerError(
          'NAMESPACE_NOT_FOUND',
          `namespace "${namespace}" has no tenant and the routing file lists no cell to create it on`,
        );
      const routes = new Map(t.routes);
      routes.set(namespace, { namespace, cell, state: 'active' });
      const next: RoutingTable = { version: t.version + 1, cells: t.cells, routes };
      const tmp = `${this.file}.tmp-${process.pid}`;
      const out = openSync(tmp, 'w');
      try {
        writeSync(out, routingFileJson(next));
        fsyncSync(out);
      } finally {
        closeSync(out);
      }
      renameSync(tmp, this.file);
      this.logger.info({ namespace, cell, version: next.version }, 'auto-tenants: namespace created');
      return this.adopt(next);
    } finally {
      unlinkSync(lock);
    }
  }

  close(): void {
    clearInterval(this.poller);
  }
}

/**
 * Splits `--control-plane`'s value into base URLs: one URL, or several
 * separated by commas (the instances of one meta group). Throws with the
 * reason when an entry is not an http(s) URL a router can follow.
 */
export function parseControlPlaneUrls(list: string): string[] {
  const urls = list.split(',').map((u) => u.trim());
  const seen = new Set<string>();
  for (const u of urls) {
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      throw new Error(`"${u}" is not a URL; give base URLs separated by commas, e.g. http://127.0.0.1:7400,http://127.0.0.1:7401`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`"${u}" is not an http or https URL`);
    if (url.username || url.password) throw new Error(`"${u}" carries credentials; pass the token in FENCER_CONTROL_PLANE_TOKEN`);
    if (seen.has(url.href)) throw new Error(`"${u}" is listed twice`);
    seen.add(url.href);
  }
  return urls;
}

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

/** One call to a control-plane instance that did not get an answer: a connection error, a timeout or a 5xx. The next instance may do better. */
class InstanceFault extends Error {}

/** A call that is not a long poll: the fleet, a plain routing read, a tenant creation. */
const CONTROL_PLANE_CALL_TIMEOUT_MS = 10_000;
const LIVENESS_PROBE_MS_DEFAULT = 5_000;

export class ControlPlaneRoutingSource extends BaseSource implements RoutingSource {
  private closed = false;
  private readonly abort = new AbortController();
  private cells = EMPTY_TABLE.cells;
  private readonly waitMs: number;
  private readonly urls: readonly string[];
  /** Index in `urls` of the instance followed; only moveOn() changes it. */
  private at = 0;
  private readonly followingGauge: Gauge<'url'> | undefined;
  private readonly switches: Counter | undefined;

  constructor(private readonly opts: ControlPlaneOptions) {
    super();
    this.waitMs = opts.waitMs ?? 30_000;
    this.urls = typeof opts.baseUrl === 'string' ? parseControlPlaneUrls(opts.baseUrl) : [...opts.baseUrl];
    if (this.urls.length === 0) throw new Error('ControlPlaneRoutingSource needs at least one control-plane URL');
    if (opts.registry) {
      const registers = [opts.registry];
      this.followingGauge = new Gauge({
        name: 'fencer_routing_control_plane_following',
        help: 'The control-plane instance whose routing table is followed (1), by base URL; the others listed are 0',
        labelNames: ['url'],
        registers,
      });
      this.switches = new Counter({
        name: 'fencer_routing_control_plane_switches_total',
        help: 'Moves to the next control-plane instance after one failed to answer',
        registers,
      });
      this.showFollowing();
    }
  }

  /** The base URL of the control-plane instance followed now. */
  following(): string {
    return this.urls[this.at]!;
  }

  private showFollowing(): void {
    this.urls.forEach((url, i) => this.followingGauge?.set({ url }, i === this.at ? 1 : 0));
  }

  /**
   * After a fault of instance `from`, follows the next one. A fault seen by a
   * call that started before another call already moved on is ignored, so
   * concurrent failures (the long poll and a refresh) move one step, not two.
   */
  private moveOn(from: number, fault: InstanceFault): void {
    if (this.at !== from || this.urls.length === 1) return;
    this.at = (from + 1) % this.urls.length;
    this.switches?.inc();
    this.showFollowing();
    this.opts.logger.warn(
      { err: fault.message, from: this.urls[from], to: this.urls[this.at], version: this.current.version },
      'control-plane instance did not answer; following the next',
    );
  }

  /** GET on instance `at`; `hung`, when given, is aborted (with an InstanceFault) by the liveness probe. */
  private async get(path: string, timeoutMs: number, at: number, hung?: AbortSignal): Promise<unknown> {
    const url = new URL(path, this.urls[at]);
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
    const probe = sinceVersion !== undefined && this.urls.length > 1 ? this.probeWhileParked(at) : undefined;
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

  /**
   * Asks instance `at`'s /v1/health every livenessProbeMs while a long poll
   * is parked there; aborts `hung` with an InstanceFault when a probe gets no
   * HTTP answer in time (an answer of any status means the process lives).
   */
  private probeWhileParked(at: number): { hung: AbortSignal; stop(): void } {
    const everyMs = this.opts.livenessProbeMs ?? LIVENESS_PROBE_MS_DEFAULT;
    const hung = new AbortController();
    const stopped = new AbortController();
    let probing = false;
    const probe = async (): Promise<void> => {
      if (probing) return;
      probing = true;
      const url = new URL('/v1/health', this.urls[at]);
      try {
        const res = await fetch(url, {
          signal: AbortSignal.any([stopped.signal, AbortSignal.timeout(everyMs)]),
          headers: this.headers(),
        });
        await res.body?.cancel();
      } catch (e) {
        if (!stopped.signal.aborted)
          hung.abort(new InstanceFault(`GET ${url.href} (liveness probe while the long poll was parked): ${(e as Error).message}`));
      } finally {
        probing = false;
      }
    };
    const timer = setInterval(() => void probe(), everyMs);
    timer.unref();
    return {
      hung: hung.signal,
      stop: () => {
        clearInterval(timer);
        stopped.abort();
      },
    };
  }

  /** A plain (not long) poll, on the instance followed and then, after each fault, on the next: each instance at most once. */
  private async pollAny(): Promise<RoutingTable> {
    let fault: InstanceFault | undefined;
    for (let tried = 0; tried < this.urls.length && !this.closed; tried++) {
      const at = this.at;
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
        { err: (e as Error).message, controlPlanes: this.urls },
        'control plane unreachable; routing starts empty and keeps trying',
      );
    }
    void this.loop();
  }

  private async loop(): Promise<void> {
    let backoffMs = 250;
    while (!this.closed) {
      const at = this.at;
      try {
        await this.poll(this.current.version, at);
        backoffMs = 250;
      } catch (e) {
        if (this.closed) return;
        if (e instanceof InstanceFault && this.urls.length > 1) this.moveOn(at, e);
        else
          this.opts.logger.warn(
            { err: (e as Error).message, version: this.current.version },
            'routing long poll failed; serving from the last table',
          );
        await sleep(backoffMs);
        backoffMs = Math.min(5_000, backoffMs * 2);
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
    for (let tried = 0; tried < this.urls.length; tried++) {
      const at = this.at;
      const url = new URL('/v1/tenants', this.urls[at]);
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
      `no control-plane instance created tenant "${namespace}" (${this.urls.length} tried; last: ${lastError}); retry`,
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
    for (let i = 0; i < 50; i++) {
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

/** A fixed table, for tests and for a router whose cells never move. */
export class StaticRoutingSource extends BaseSource implements RoutingSource {
  constructor(table: RoutingTable) {
    super();
    this.current = table;
  }
  async start(): Promise<void> {}
  async refresh(): Promise<RoutingTable> {
    return this.current;
  }
  set(t: RoutingTable): void {
    this.adopt(t);
  }
  createTenant(namespace: string): Promise<RoutingTable> {
    return Promise.reject(new FencerError('NAMESPACE_NOT_FOUND', `namespace "${namespace}" has no tenant`));
  }
  close(): void {}
}
