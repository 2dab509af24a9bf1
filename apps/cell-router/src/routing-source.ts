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
 * - `ControlPlaneRoutingSource` (`--control-plane URL`): the contract's long
 *   poll `GET /v1/routing?sinceVersion=&waitMs=`, with the cells' replica
 *   addresses from `GET /v1/fleet`; auto-tenants is `POST /v1/tenants`.
 *   While the control plane is unreachable the last table keeps serving.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, type Stats, statSync, unlinkSync, writeSync } from 'node:fs';
import { FencerError } from '@fencer/base';
import type { Logger } from 'pino';
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

export interface ControlPlaneOptions {
  readonly baseUrl: string;
  readonly logger: Logger;
  /** waitMs of each long poll (the contract allows up to 60,000). */
  readonly waitMs?: number;
  /** `Authorization: Bearer` token, when the control plane has auth on. */
  readonly token?: string;
}

export class ControlPlaneRoutingSource extends BaseSource implements RoutingSource {
  private closed = false;
  private readonly abort = new AbortController();
  private cells = EMPTY_TABLE.cells;
  private readonly waitMs: number;

  constructor(private readonly opts: ControlPlaneOptions) {
    super();
    this.waitMs = opts.waitMs ?? 30_000;
  }

  private async get(path: string, timeoutMs: number): Promise<unknown> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(timeoutMs)]);
    const res = await fetch(new URL(path, this.opts.baseUrl), { signal, headers: this.headers() });
    if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status}`);
    return res.json();
  }

  private headers(): Record<string, string> {
    return this.opts.token ? { authorization: `Bearer ${this.opts.token}` } : {};
  }

  /** One poll: routes (long poll when sinceVersion is given), then the fleet's addresses if a route names a cell not known yet. */
  private async poll(sinceVersion: number | undefined): Promise<RoutingTable> {
    const q = sinceVersion === undefined ? '' : `?sinceVersion=${sinceVersion}&waitMs=${this.waitMs}`;
    const { version, routes } = parseRoutes(await this.get(`/v1/routing${q}`, this.waitMs + 10_000), 'GET /v1/routing');
    if ([...routes.values()].some((r) => !this.cells.has(r.cell)) || this.cells.size === 0) {
      const fleet = (await this.get('/v1/fleet', 10_000)) as { cells?: unknown };
      this.cells = parseCells(fleet?.cells, 'GET /v1/fleet');
    }
    return this.adopt({ version, cells: this.cells, routes });
  }

  async start(): Promise<void> {
    try {
      await this.poll(undefined);
    } catch (e) {
      this.opts.logger.warn({ err: (e as Error).message }, 'control plane unreachable; routing starts empty and keeps trying');
    }
    void this.loop();
  }

  private async loop(): Promise<void> {
    let backoffMs = 250;
    while (!this.closed) {
      try {
        await this.poll(this.current.version);
        backoffMs = 250;
      } catch (e) {
        if (this.closed) return;
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
      return await this.poll(undefined);
    } catch {
      return this.current;
    }
  }

  async createTenant(namespace: string): Promise<RoutingTable> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(10_000)]);
    let res: Response;
    try {
      res = await fetch(new URL('/v1/tenants', this.opts.baseUrl), {
        method: 'POST',
        signal,
        headers: { 'content-type': 'application/json', 'idempotency-key': `auto-tenant-${namespace}`, ...this.headers() },
        body: JSON.stringify({ namespace }),
      });
    } catch (e) {
      throw new FencerError(
        'NO_LEADER',
        `the control plane did not answer the creation of tenant "${namespace}": ${(e as Error).message}; retry`,
      );
    }
    if (res.status === 400) {
      const p = (await res.json().catch(() => ({}))) as { detail?: string };
      throw new FencerError('INVALID_NAME', `namespace "${namespace}" cannot be a tenant: ${p.detail ?? 'refused by the control plane'}`);
    }
    // 409: it exists already (another router created it first); either way it is routed soon.
    if (res.status !== 201 && res.status !== 409 && res.status !== 200)
      throw new FencerError('NO_LEADER', `the control plane answered HTTP ${res.status} to the creation of tenant "${namespace}"; retry`);
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
