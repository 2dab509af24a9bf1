/**
 * The routing table from a file (`--routing FILE`): read at start and again
 * whenever it changes (polled by stat); a table is adopted only if its
 * version is higher. A file that does not parse is logged and the last
 * table kept.
 *
 * Auto-tenants without a control plane: the namespace goes on the cell the
 * contract's placement rule picks (leastLoadedCell), and the file is
 * rewritten atomically (write a temporary file, fsync, rename) with
 * version + 1, under an exclusive `FILE.lock`, so that routers and proxies
 * sharing one file do not lose each other's tenants.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, type Stats, statSync, unlinkSync, writeSync } from 'node:fs';
import { FencerError } from '@fencer/base';
import { leastLoadedCell, namespacesPerCell, parseRoutingFile, routingFileJson, type RoutingTable } from '@fencer/contract';
import type { Logger } from 'pino';
import { ROUTING_FILE_BYTES_MAX } from './limits.js';
import { AdoptingSource, sleep, type RoutingSource } from './routing-source.js';

/** How often the file's stat is looked at, by default. */
const POLL_MS_DEFAULT = 200;
/** How long a creation waits for another router's lock on the file; a lock older than this is taken to be left by a dead router. */
const FILE_LOCK_WAIT_MS_MAX = 5_000;
/** The pause between two tries at a held lock. */
const FILE_LOCK_RETRY_MS = 20;

export class FileRoutingSource extends AdoptingSource implements RoutingSource {
  private writing: Promise<unknown> = Promise.resolve();
  /** The file's stat as last looked at; a poll that finds it different reloads. */
  private seen: Pick<Stats, 'ino' | 'size' | 'mtimeMs'> | undefined;
  private poller: NodeJS.Timeout | undefined;

  constructor(
    private readonly file: string,
    private readonly logger: Logger,
    private readonly pollMs = POLL_MS_DEFAULT,
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

  /** Creations run one at a time in this process (the file lock orders them between processes). */
  createTenant(namespace: string): Promise<RoutingTable> {
    const run = this.writing.then(() => this.createLocked(namespace));
    this.writing = run.catch(() => undefined);
    return run;
  }

  private async createLocked(namespace: string): Promise<RoutingTable> {
    const lock = await this.lockFile();
    try {
      // Read under the lock: another router may have created it, or other namespaces, since our last poll.
      const t = this.reload();
      if (t.routes.has(namespace)) return t;
      const cell = leastLoadedCell(t.cells.values(), namespacesPerCell(t.routes.values()));
      if (cell === undefined)
        throw new FencerError(
          'NAMESPACE_NOT_FOUND',
          `namespace "${namespace}" has no tenant and the routing file lists no cell to create it on`,
        );
      const routes = new Map(t.routes);
      routes.set(namespace, { namespace, cell, state: 'active' });
      const next: RoutingTable = { version: t.version + 1, cells: t.cells, routes };
      this.writeAtomically(next);
      this.logger.info({ namespace, cell, version: next.version }, 'auto-tenants: namespace created');
      return this.adopt(next);
    } finally {
      unlinkSync(lock);
    }
  }

  /** Takes `FILE.lock` (created exclusively); resolves with its path, which the caller unlinks. */
  private async lockFile(): Promise<string> {
    const lock = `${this.file}.lock`;
    const giveUpAt = Date.now() + FILE_LOCK_WAIT_MS_MAX;
    for (;;) {
      try {
        closeSync(openSync(lock, 'wx'));
        return lock;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      // A lock older than the wait is left by a router that died mid-write.
      try {
        if (Date.now() - statSync(lock).mtimeMs > FILE_LOCK_WAIT_MS_MAX) unlinkSync(lock);
      } catch {
        /* gone meanwhile */
      }
      if (Date.now() > giveUpAt) throw new FencerError('NO_LEADER', `the routing file is locked by another router (${lock}); retry`);
      await sleep(FILE_LOCK_RETRY_MS);
    }
  }

  /** Temporary file, fsync, rename: a reader sees the old table or the new one, never half of one. */
  private writeAtomically(t: RoutingTable): void {
    const tmp = `${this.file}.tmp-${process.pid}`;
    const out = openSync(tmp, 'w');
    try {
      writeSync(out, routingFileJson(t));
      fsyncSync(out);
    } finally {
      closeSync(out);
    }
    renameSync(tmp, this.file);
  }

  close(): void {
    clearInterval(this.poller);
  }
}
