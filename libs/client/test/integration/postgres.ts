/**
 * A private PostgreSQL for one test file: initdb into a temp dir, start on a
 * free 127.0.0.1 port with its socket in that dir, psql through child
 * processes (no npm driver needed), stop and delete everything afterwards.
 * Needs the Debian `postgresql` package; root runs the server as the
 * `postgres` user (postgres refuses to run as root).
 */
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';

export interface Postgres {
  readonly port: number;
  readonly psqlPath: string;
  /** Runs SQL (statements separated by ";" and newlines) and returns psql's unaligned output. */
  psql(sql: string): Promise<string>;
  stop(): Promise<void>;
}

export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length ? path.join(root, versions[0] as string, 'bin') : undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function startPostgres(): Promise<Postgres> {
  const bin = postgresBinDir();
  if (!bin)
    throw new Error('PostgreSQL is not installed: apt-get install -y postgresql (Debian) — the paused-holder test needs a real server');
  const dir = mkdtempSync(path.join(tmpdir(), 'fencer-pg-'));
  const asRoot = userInfo().uid === 0;
  const owner = asRoot ? Number(execFileSync('id', ['-u', 'postgres']).toString().trim()) : undefined;
  if (owner !== undefined) chownSync(dir, owner, owner);
  const run = (cmd: string, args: string[]): void => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
    execFileSync(file as string, argv as string[], { stdio: 'pipe' });
  };
  const data = path.join(dir, 'data');
  run(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const port = await freePort();
  run(path.join(bin, 'pg_ctl'), [
    '-D',
    data,
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
    '-l',
    path.join(dir, 'log'),
    '-w',
    '-t',
    '60',
    'start',
  ]);
  const psqlPath = path.join(bin, 'psql');
  return {
    port,
    psqlPath,
    psql: (sql) =>
      new Promise((resolve, reject) => {
        const child = execFile(
          psqlPath,
          ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-At', '-v', 'ON_ERROR_STOP=1', '-f', '-'],
          (err, stdout, stderr) => (err ? reject(new Error(`psql failed: ${stderr || err.message}`)) : resolve(stdout)),
        );
        child.stdin!.end(sql);
      }),
    stop: async () => {
      try {
        run(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
