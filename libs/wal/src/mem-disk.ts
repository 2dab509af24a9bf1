/**
 * An in-memory `Disk` for tests and the deterministic simulator. It keeps,
 * per file, the durable bytes and the log of writes since the last
 * successful sync, and per directory the durable names and the log of
 * creates/renames/unlinks since the last directory sync. `crash()` throws
 * away what a power cut may throw away: unsynced writes (all, or a random
 * prefix of them with the last one torn) and directory changes since the
 * last directory sync (all, or a random prefix, since journaling file
 * systems commit metadata in order).
 *
 * Completions go through an injected scheduler (`schedule(delayMs, fn)`),
 * so the simulator decides in virtual time when a write or fsync finishes.
 * Without one, completions wait in an internal queue until the test calls
 * `runPending()`. Nothing completes synchronously inside the call that
 * started it. No `node:` imports: the replica and the simulator use this.
 */
import { AssertionError, assert, assertUint, type Random } from '@fencer/base';
import { type Disk, type DiskFile, type Done, baseName, dirName } from './disk.js';

export type MemDiskOp = 'open' | 'write' | 'allocate' | 'sync' | 'close' | 'rename' | 'unlink' | 'syncDir';

export interface MemDiskOptions {
  /** Runs `fn` after `delayMs` of (virtual) time; absent: the internal queue drained by runPending(). */
  schedule?: (delayMs: number, fn: () => void) => void;
  /** Latency of each operation handed to `schedule`; default 0. */
  delayMs?: (op: MemDiskOp, path: string) => number;
}

export interface CrashPolicy {
  /**
   * 'lose' (default): every unsynced write and directory change is gone.
   * 'random': a random prefix of each file's unsynced writes survives, the
   * next one possibly torn, and a random prefix of each directory's changes.
   */
  mode?: 'lose' | 'random';
  random?: Random;
  /** In 'random' mode, chance that the first lost write is torn (part of it lands). Default 0.5. */
  tearChance?: number;
  /**
   * How a torn write tears. Absent: a prefix lands, cut at a random byte.
   * A number of bytes (512 for sectors, 4096 for pages): each aligned unit
   * of the write lands whole or not at all, independently, as when the
   * kernel writes back a multi-page write's pages in any order.
   */
  tearUnitBytes?: number;
  /**
   * In 'random' mode, keep a random subset of each file's unsynced writes
   * instead of a prefix: the disk persisted them out of order (a later
   * write's pages flushed before an earlier one's).
   */
  reorder?: boolean;
}

/** An error shaped like Node's system errors, so callers handle both alike. */
export class MemDiskError extends Error {
  override readonly name = 'MemDiskError';
  constructor(
    readonly code: string,
    readonly syscall: MemDiskOp,
    readonly path: string,
  ) {
    super(`${code}: ${syscall} ${path}`);
  }
}

type WriteOp = { kind: 'write'; position: number; data: Uint8Array } | { kind: 'extend'; bytes: number };
/** A write in a file's unsynced log, numbered so concurrent syncs each cover what was issued before them. */
type PendingOp = WriteOp & { readonly seq: number };

/**
 * The content of one inode, current or durable. Sparse at the end: `size`
 * may exceed the buffer, the rest reads as zeros, so a preallocated 64 MiB
 * segment costs memory only for what was written into it.
 */
class Bytes {
  buf = new Uint8Array(0);
  size = 0;

  private grow(bytes: number): void {
    if (bytes <= this.buf.length) return;
    const next = new Uint8Array(Math.max(bytes, this.buf.length * 2, 256));
    next.set(this.buf);
    this.buf = next;
  }

  apply(op: WriteOp, tornBytes = -1): void {
    if (op.kind === 'extend') {
      this.size = Math.max(this.size, op.bytes);
      return;
    }
    const data = tornBytes >= 0 ? op.data.subarray(0, tornBytes) : op.data;
    this.grow(op.position + data.length);
    this.buf.set(data, op.position);
    this.size = Math.max(this.size, op.position + data.length);
  }

  copy(): Bytes {
    const c = new Bytes();
    c.buf = this.buf.slice();
    c.size = this.size;
    return c;
  }

  /** A fresh copy of the whole content. */
  read(): Uint8Array {
    const out = new Uint8Array(this.size);
    out.set(this.buf.subarray(0, Math.min(this.size, this.buf.length)));
    return out;
  }
}

class Inode {
  current = new Bytes();
  durable = new Bytes();
  /** Writes not yet made durable by a sync, in issue order. */
  unsynced: PendingOp[] = [];
  nextSeq = 1;
  /**
   * Counts failed syncs, like Linux's per-file errseq: a sync through a
   * handle reports an error if one happened since that handle last looked,
   * so every open file description learns of a failed writeback once.
   */
  errSeq = 0;
}

type DirOp = { kind: 'link'; name: string; inode: Inode } | { kind: 'unlink'; name: string } | { kind: 'rename'; from: string; to: string };

class Dir {
  current = new Map<string, Inode>();
  durable = new Map<string, Inode>();
  /** Changes since the last successful syncDir, in issue order. */
  unsynced: DirOp[] = [];
}

function applyDirOp(names: Map<string, Inode>, op: DirOp): void {
  switch (op.kind) {
    case 'link':
      names.set(op.name, op.inode);
      return;
    case 'unlink':
      names.delete(op.name);
      return;
    case 'rename': {
      const inode = names.get(op.from);
      if (inode === undefined) return;
      names.delete(op.from);
      names.set(op.to, inode);
      return;
    }
  }
}

/** Lands each `unitBytes`-aligned piece of a write with even odds (a write torn at sector or page granularity). */
function applySomeUnits(durable: Bytes, op: WriteOp & { kind: 'write' }, unitBytes: number, random: Random): void {
  assert(Number.isInteger(unitBytes) && unitBytes > 0, 'tearUnitBytes is a positive integer');
  const end = op.position + op.data.length;
  for (let from = op.position; from < end;) {
    const to = Math.min(end, (Math.floor(from / unitBytes) + 1) * unitBytes);
    if (random.chance(0.5)) durable.apply({ kind: 'write', position: from, data: op.data.subarray(from - op.position, to - op.position) });
    from = to;
  }
}

interface Fault {
  op: MemDiskOp;
  match: (path: string) => boolean;
  code: string;
  remaining: number;
}

export class MemDisk implements Disk {
  private readonly dirs = new Map<string, Dir>();
  private readonly queue: Array<() => void> = [];
  private readonly faults: Fault[] = [];
  /** Bumped by crash(): completions and handles of an older epoch belong to a dead process. */
  private epoch = 0;
  readonly stats = { writes: 0, syncs: 0, dirSyncs: 0, writtenBytes: 0 };

  constructor(private readonly options: MemDiskOptions = {}) {}

  // ---- Disk ----

  mkdirp(dir: string): void {
    // Directories themselves are durable at once: the WAL creates its own only at first start.
    let path = '';
    for (const part of dir.split('/')) {
      path = path === '' ? part || '/' : path === '/' ? `/${part}` : `${path}/${part}`;
      if (part !== '' && !this.dirs.has(path)) this.dirs.set(path, new Dir());
    }
    if (!this.dirs.has(dir)) this.dirs.set(dir, new Dir());
  }

  list(dir: string): string[] {
    const d = this.dirs.get(dir);
    return d === undefined ? [] : [...d.current.keys()].sort();
  }

  read(path: string): Uint8Array {
    const inode = this.lookup(path);
    if (inode === undefined) throw new MemDiskError('ENOENT', 'open', path);
    return inode.current.read();
  }

  open(path: string, mode: 'create' | 'existing', done: (err: Error | null, file?: DiskFile) => void): void {
    const dir = this.dirs.get(dirName(path));
    let err: Error | null = this.takeFault('open', path);
    let inode: Inode | undefined;
    if (err === null && dir === undefined) err = new MemDiskError('ENOENT', 'open', path);
    if (err === null && dir !== undefined) {
      if (mode === 'create') {
        inode = new Inode();
        this.dirOp(dir, { kind: 'link', name: baseName(path), inode });
      } else {
        inode = dir.current.get(baseName(path));
        if (inode === undefined) err = new MemDiskError('ENOENT', 'open', path);
      }
    }
    const file = inode === undefined ? undefined : new MemFile(this, path, inode, this.epoch);
    this.complete('open', path, () => (err === null ? done(null, file) : done(err)));
  }

  rename(from: string, to: string, done: Done): void {
    assert(dirName(from) === dirName(to), 'MemDisk renames within one directory only');
    const dir = this.dirs.get(dirName(from));
    let err = this.takeFault('rename', from);
    if (err === null && (dir === undefined || !dir.current.has(baseName(from)))) err = new MemDiskError('ENOENT', 'rename', from);
    if (err === null && dir !== undefined) this.dirOp(dir, { kind: 'rename', from: baseName(from), to: baseName(to) });
    this.complete('rename', from, () => done(err));
  }

  unlink(path: string, done: Done): void {
    const dir = this.dirs.get(dirName(path));
    let err = this.takeFault('unlink', path);
    if (err === null && (dir === undefined || !dir.current.has(baseName(path)))) err = new MemDiskError('ENOENT', 'unlink', path);
    if (err === null && dir !== undefined) this.dirOp(dir, { kind: 'unlink', name: baseName(path) });
    this.complete('unlink', path, () => done(err));
  }

  syncDir(dir: string, done: Done): void {
    const d = this.dirs.get(dir);
    let err = this.takeFault('syncDir', dir);
    if (err === null && d === undefined) err = new MemDiskError('ENOENT', 'syncDir', dir);
    // The changes issued before the call are the ones this sync covers.
    const covered = d === undefined ? 0 : d.unsynced.length;
    const epoch = this.epoch;
    this.stats.dirSyncs++;
    this.complete('syncDir', dir, () => {
      if (err === null && d !== undefined && epoch === this.epoch) {
        for (const op of d.unsynced.splice(0, covered)) applyDirOp(d.durable, op);
      }
      done(err);
    });
  }

  // ---- fault control ----

  /**
   * Makes the next `count` operations of kind `op` on matching paths fail
   * with `code` (default EIO). A failed sync drops the writes it covered:
   * they stay readable until a crash but never become durable; a later sync
   * through another handle that was open at the time reports EIO once too.
   */
  failNext(op: MemDiskOp, options: { match?: string | ((path: string) => boolean); count?: number; code?: string } = {}): void {
    const m = options.match;
    const match = m === undefined ? () => true : typeof m === 'string' ? (p: string) => p.includes(m) : m;
    this.faults.push({ op, match, code: options.code ?? 'EIO', remaining: options.count ?? 1 });
  }

  /**
   * A power cut: pending completions never fire, open handles die, and each
   * file and directory falls back to what was durable (plus, in 'random'
   * mode, some of what was not).
   */
  crash(policy: CrashPolicy = {}): void {
    const mode = policy.mode ?? 'lose';
    const random = policy.random;
    assert(mode === 'lose' || random !== undefined, "crash mode 'random' needs a Random");
    this.epoch++;
    this.queue.length = 0;
    const inodes = new Set<Inode>();
    for (const dir of this.dirs.values()) {
      let keep = 0;
      if (mode === 'random' && random !== undefined) keep = random.int(dir.unsynced.length + 1);
      for (const op of dir.unsynced.slice(0, keep)) applyDirOp(dir.durable, op);
      dir.unsynced = [];
      dir.current = new Map(dir.durable);
      for (const inode of dir.current.values()) inodes.add(inode);
    }
    for (const inode of inodes) {
      const ops = inode.unsynced;
      if (mode === 'random' && random !== undefined && ops.length > 0 && policy.reorder === true) {
        for (const op of ops) if (random.chance(0.5)) inode.durable.apply(op);
      } else if (mode === 'random' && random !== undefined && ops.length > 0) {
        const keep = random.int(ops.length + 1);
        for (let i = 0; i < keep; i++) inode.durable.apply(ops[i]!);
        const torn = ops[keep];
        if (torn !== undefined && torn.kind === 'write' && random.chance(policy.tearChance ?? 0.5)) {
          if (policy.tearUnitBytes === undefined) inode.durable.apply(torn, random.int(torn.data.length + 1));
          else applySomeUnits(inode.durable, torn, policy.tearUnitBytes, random);
        }
      }
      inode.unsynced = [];
      inode.current = inode.durable.copy();
    }
  }

  // ---- inspection and offline damage, for tests ----

  exists(path: string): boolean {
    return this.lookup(path) !== undefined;
  }

  size(path: string): number {
    const inode = this.lookup(path);
    assert(inode !== undefined, `no file ${path}`);
    return inode.current.size;
  }

  /** Overwrites bytes as if on the platter: current and durable alike (bit rot, a bad sector). */
  poke(path: string, position: number, data: Uint8Array): void {
    const inode = this.lookup(path);
    assert(inode !== undefined, `no file ${path}`);
    assert(position + data.length <= inode.current.size, 'poke stays inside the file');
    const op: WriteOp = { kind: 'write', position, data: data.slice() };
    inode.current.apply(op);
    if (position + data.length <= inode.durable.size) inode.durable.apply(op);
  }

  flipBit(path: string, bitOffset: number): void {
    assertUint(bitOffset, 'bitOffset');
    const byte = this.read(path)[bitOffset >> 3];
    assert(byte !== undefined, 'flipBit inside the file');
    this.poke(path, bitOffset >> 3, Uint8Array.of(byte ^ (1 << (bitOffset & 7))));
  }

  /** Removes a name durably, as if the directory entry were lost. */
  removeEntry(path: string): void {
    const dir = this.dirs.get(dirName(path));
    assert(dir !== undefined && dir.current.has(baseName(path)), `no file ${path}`);
    dir.current.delete(baseName(path));
    dir.durable.delete(baseName(path));
  }

  /** Completions waiting in the internal queue (without an injected scheduler). */
  get pendingCount(): number {
    return this.queue.length;
  }

  /**
   * Runs queued completions, including those they queue in turn, until none
   * is left; more than `limit` means a caller loops. Returns how many ran.
   */
  runPending(limit = 1_000_000): number {
    let ran = 0;
    while (this.queue.length > 0) {
      assert(ran < limit, 'MemDisk.runPending: too many completions; a caller loops');
      this.queue.shift()!();
      ran++;
    }
    return ran;
  }

  /** Runs at most `count` queued completions (a crash can then strike between any two). Returns how many ran. */
  runSome(count: number): number {
    let ran = 0;
    while (ran < count && this.queue.length > 0) {
      this.queue.shift()!();
      ran++;
    }
    return ran;
  }

  // ---- used by MemFile ----

  /** @internal */
  fileWrite(file: MemFile, position: number, data: Uint8Array, done: Done): void {
    assertUint(position, 'position');
    this.checkEpoch(file);
    const err = this.takeFault('write', file.path);
    if (err === null) {
      const op: PendingOp = { kind: 'write', position, data: data.slice(), seq: file.inode.nextSeq++ };
      file.inode.current.apply(op);
      file.inode.unsynced.push(op);
      this.stats.writes++;
      this.stats.writtenBytes += data.length;
    }
    this.complete('write', file.path, () => done(err));
  }

  /** @internal */
  fileAllocate(file: MemFile, bytes: number, done: Done): void {
    assertUint(bytes, 'bytes');
    this.checkEpoch(file);
    const err = this.takeFault('allocate', file.path);
    if (err === null && bytes > file.inode.current.size) {
      const op: PendingOp = { kind: 'extend', bytes, seq: file.inode.nextSeq++ };
      file.inode.current.apply(op);
      file.inode.unsynced.push(op);
    }
    this.complete('allocate', file.path, () => done(err));
  }

  /** @internal */
  fileSync(file: MemFile, done: Done): void {
    this.checkEpoch(file);
    const err = this.takeFault('sync', file.path);
    const inode = file.inode;
    // The writes issued before the call are the ones this sync covers.
    const covered = inode.nextSeq - 1;
    const epoch = this.epoch;
    this.stats.syncs++;
    this.complete('sync', file.path, () => {
      if (epoch !== this.epoch) return;
      const ops = inode.unsynced.filter((op) => op.seq <= covered);
      inode.unsynced = inode.unsynced.filter((op) => op.seq > covered);
      if (err !== null) {
        // The covered writes are dropped: readable until a crash, never durable (fsyncgate).
        inode.errSeq++;
        file.seenErrSeq = inode.errSeq;
        return done(err);
      }
      for (const op of ops) inode.durable.apply(op);
      if (inode.errSeq > file.seenErrSeq) {
        file.seenErrSeq = inode.errSeq;
        return done(new MemDiskError('EIO', 'sync', file.path));
      }
      done(null);
    });
  }

  /** @internal */
  fileClose(file: MemFile, done: Done): void {
    this.complete('close', file.path, () => done(null));
  }

  // ---- internals ----

  private checkEpoch(file: MemFile): void {
    // Per disk operation: the message is built only when the assertion fails.
    // A handle from before a crash belongs to a process that no longer exists.
    if (file.epoch !== this.epoch) throw new AssertionError(`MemDisk: ${file.path} was opened before a crash`);
  }

  private lookup(path: string): Inode | undefined {
    return this.dirs.get(dirName(path))?.current.get(baseName(path));
  }

  private dirOp(dir: Dir, op: DirOp): void {
    applyDirOp(dir.current, op);
    dir.unsynced.push(op);
  }

  private takeFault(op: MemDiskOp, path: string): Error | null {
    const at = this.faults.findIndex((f) => f.op === op && f.remaining > 0 && f.match(path));
    if (at < 0) return null;
    const fault = this.faults[at]!;
    fault.remaining--;
    if (fault.remaining === 0) this.faults.splice(at, 1);
    return new MemDiskError(fault.code, op, path);
  }

  private complete(op: MemDiskOp, path: string, fn: () => void): void {
    const epoch = this.epoch;
    const run = (): void => {
      if (epoch === this.epoch) fn();
    };
    const schedule = this.options.schedule;
    if (schedule === undefined) this.queue.push(run);
    else schedule(this.options.delayMs?.(op, path) ?? 0, run);
  }
}

class MemFile implements DiskFile {
  private closed = false;
  /** The inode's errSeq this handle has reported (set at open, like Linux's f_wb_err). */
  seenErrSeq: number;

  constructor(
    private readonly disk: MemDisk,
    readonly path: string,
    /** @internal */ readonly inode: Inode,
    /** @internal */ readonly epoch: number,
  ) {
    this.seenErrSeq = inode.errSeq;
  }

  write(position: number, data: Uint8Array, done: Done): void {
    if (this.closed) throw new AssertionError(`write after close: ${this.path}`);
    this.disk.fileWrite(this, position, data, done);
  }

  allocate(bytes: number, done: Done): void {
    if (this.closed) throw new AssertionError(`allocate after close: ${this.path}`);
    this.disk.fileAllocate(this, bytes, done);
  }

  sync(done: Done): void {
    if (this.closed) throw new AssertionError(`sync after close: ${this.path}`);
    this.disk.fileSync(this, done);
  }

  close(done: Done): void {
    if (this.closed) throw new AssertionError(`double close: ${this.path}`);
    this.closed = true;
    this.disk.fileClose(this, done);
  }
}
