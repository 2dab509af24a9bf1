/**
 * Fencing: the resource, not the lock service, has the last word. Every
 * write carries the writer's token, and the resource refuses a token lower
 * than one it has already accepted — so a holder that paused past its lease
 * (GC, SIGSTOP, a slow disk) cannot overwrite the work of the holder that
 * came after it (Kleppmann, "How to do distributed locking"; Chubby's
 * sequencers).
 *
 * Two helpers:
 * - `fencedUpdate` builds the conditional UPDATE for a SQL row that keeps
 *   the token of its last writer in a `fence` column. Zero rows updated
 *   means the write was fenced off: a newer holder has written.
 * - `FencedResource` keeps the highest token seen per name, for resources
 *   that cannot do a conditional write themselves (a file, a queue, an
 *   in-process cache): call `admit(name, token)` before every write.
 */
import { FencerError } from '@fencer/base';

export interface FencedUpdateOptions {
  /** Table name (optionally schema-qualified: "billing.invoices"). */
  readonly table: string;
  /** Columns to set and their values (sent as parameters, never spliced into the text). */
  readonly set: Readonly<Record<string, unknown>>;
  /** Value of the row's key. */
  readonly id: unknown;
  /** The writer's fencing token (LockHandle.token). */
  readonly token: number;
  /** Key column; default "id". */
  readonly idColumn?: string;
  /** Column holding the last writer's token; default "fence". */
  readonly fenceColumn?: string;
  /**
   * Let the same grant write the row again (fence <= token), the default; a
   * grant's token is unique, so only the current holder matches. false makes
   * every write need a strictly newer token (fence < token), which rejects a
   * holder's second write as well.
   */
  readonly allowSameToken?: boolean;
}

/** A parameterised statement in PostgreSQL's $n style, for pg's `query(text, values)` or psql. */
export interface SqlStatement {
  readonly text: string;
  readonly values: readonly unknown[];
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function quoteIdent(name: string, what: string): string {
  const parts = name.split('.');
  if (parts.length > 2 || !parts.every((p) => IDENT.test(p))) {
    throw new FencerError(
      'INVALID_ARGUMENT',
      `${what} "${name.slice(0, 80)}" must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*, optionally schema.name)`,
    );
  }
  return parts.map((p) => `"${p}"`).join('.');
}

function checkToken(token: number): void {
  if (!(Number.isSafeInteger(token) && token > 0))
    throw new FencerError('INVALID_ARGUMENT', `a fencing token is a positive integer, got ${token}`);
}

/**
 * UPDATE <table> SET <cols> = $1.., <fence> = $t WHERE <id> = $i AND <fence> <= $t
 * Run it and check the row count: 1 = written, 0 = fenced off (or no such row).
 */
export function fencedUpdate(options: FencedUpdateOptions): SqlStatement {
  checkToken(options.token);
  const columns = Object.keys(options.set);
  if (columns.length === 0) throw new FencerError('INVALID_ARGUMENT', 'fencedUpdate needs at least one column to set');
  const fence = quoteIdent(options.fenceColumn ?? 'fence', 'fenceColumn');
  const idColumn = quoteIdent(options.idColumn ?? 'id', 'idColumn');
  const values: unknown[] = [];
  const assignments = columns.map((c) => {
    const quoted = quoteIdent(c, 'column');
    if (quoted === fence) throw new FencerError('INVALID_ARGUMENT', `the fence column "${c}" is set by fencedUpdate itself`);
    values.push(options.set[c]);
    return `${quoted} = $${values.length}`;
  });
  values.push(options.token);
  const t = `$${values.length}`;
  values.push(options.id);
  const i = `$${values.length}`;
  const op = options.allowSameToken === false ? '<' : '<=';
  return {
    text: `UPDATE ${quoteIdent(options.table, 'table')} SET ${assignments.join(', ')}, ${fence} = ${t} WHERE ${idColumn} = ${i} AND ${fence} ${op} ${t}`,
    values,
  };
}

/** Why FencedResource refused a token. */
export class FencedOffError extends Error {
  override readonly name = 'FencedOffError';

  constructor(
    readonly resourceName: string,
    readonly token: number,
    readonly highestToken: number,
  ) {
    super(`${resourceName}: token ${token} is fenced off (a writer with token ${highestToken} came after it)`);
  }
}

/**
 * The highest token seen per name, for a resource that cannot compare
 * tokens in its own write path. It must live with the resource (in the
 * process that owns it), not with the writers. Names are never forgotten —
 * forgetting one would let a stale token in — so their number is capped.
 */
export class FencedResource {
  private readonly highest = new Map<string, number>();

  constructor(
    /** The most names this resource tracks; a new name beyond it is refused (QUOTA_EXCEEDED). */
    readonly namesMax = 100_000,
    /** Admit a token equal to the highest (the same grant writing again); default true. */
    readonly allowSameToken = true,
  ) {
    if (!(Number.isSafeInteger(namesMax) && namesMax > 0)) throw new RangeError(`namesMax must be a positive integer, got ${namesMax}`);
  }

  /** Highest token admitted for name, 0 if none. */
  highestToken(name: string): number {
    return this.highest.get(name) ?? 0;
  }

  /** True (and remembers the token) when the write may go ahead; false when a newer token was already admitted. */
  admit(name: string, token: number): boolean {
    checkToken(token);
    const top = this.highest.get(name);
    if (top === undefined && this.highest.size >= this.namesMax) {
      throw new FencerError('QUOTA_EXCEEDED', `this resource tracks at most ${this.namesMax} names`);
    }
    if (top !== undefined && (token < top || (token === top && !this.allowSameToken))) return false;
    this.highest.set(name, token);
    return true;
  }

  /** Runs write() only if the token is admitted; otherwise throws FencedOffError. */
  async guard<T>(name: string, token: number, write: () => Promise<T> | T): Promise<T> {
    if (!this.admit(name, token)) throw new FencedOffError(name, token, this.highestToken(name));
    return write();
  }
}
