/**
 * Goal: the exits every Fencer process relies on: a bug exits 1 and says
 * why on stderr even when the logger is asynchronous and the pipe is full;
 * a bad command line exits 2 with commander's "error: " taken off (0 for
 * --help and --version); SIGTERM runs the process's stop once and exits 0,
 * or 1 when the stop fails.
 * Method: child node processes that import the built library
 * (libs/service/dist), with stderr on a pipe the test reads; a stalled
 * reader is played by pausing that pipe.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dist/index.js');
let children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children = [];
});

interface Run {
  readonly child: ChildProcess;
  /** Resolves with the exit code and everything the child wrote. */
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Resolves once the child wrote `text` to stdout. */
  said(text: string): Promise<void>;
}

/** Runs `body` as an ES module after `import * as service from <dist>`. */
function run(body: string, stallStderrMs = 0): Run {
  const code = `import * as service from ${JSON.stringify(dist)};\n${body}`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    for (const w of waiters.filter((x) => stdout.includes(x.text))) w.resolve();
  });
  child.stderr!.on('data', (d: Buffer) => void (stderr += d.toString()));
  if (stallStderrMs > 0) {
    child.stderr!.pause();
    setTimeout(() => child.stderr!.resume(), stallStderrMs);
  }
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (c) => resolve({ code: c, stdout, stderr })),
  );
  const said = (text: string): Promise<void> =>
    new Promise((resolve) => (stdout.includes(text) ? resolve() : waiters.push({ text, resolve })));
  return { child, done, said };
}

describe('exitOnBug', () => {
  it('exits 1 on an uncaught exception, with a fatal log line and a plain line on stderr', async () => {
    const { code, stderr } = await run(`
      const logger = service.createLogger('t');
      service.exitOnBug(logger, 'fencer-t');
      setTimeout(() => { throw new Error('boom'); }, 0);
    `).done;
    expect(code).toBe(1);
    expect(stderr).toContain('fencer-t: uncaught exception (a bug): exiting: boom\n');
  });

  it('exits 1 on an unhandled rejection', async () => {
    const { code, stderr } = await run(`
      service.exitOnBug(service.createLogger('t', { sync: true }), 'fencer-t');
      void Promise.reject(new Error('nope'));
      setTimeout(() => {}, 10_000);
    `).done;
    expect(code).toBe(1);
    const fatal = stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; name: string });
    expect(fatal).toContainEqual(expect.objectContaining({ level: 60, name: 't', msg: 'unhandled rejection (a bug): exiting' }));
    expect(stderr).toContain('fencer-t: unhandled rejection (a bug): exiting: nope\n');
  });

  it('says why it exits even when the asynchronous logger is behind and the reader stalls on a full pipe', async () => {
    const { code, stderr } = await run(
      `
      const logger = service.createLogger('t');
      const die = service.exitOnBug(logger, 'fencer-t');
      for (let i = 0; i < 20_000; i++) logger.info({ i, pad: 'x'.repeat(100) }, 'filler');
      die('storage failure (fsync is never retried): exiting', new Error('EIO'));
    `,
      300,
    ).done;
    expect(code).toBe(1);
    expect(stderr).toContain('fencer-t: storage failure (fsync is never retried): exiting: EIO\n');
  });
});

describe('exitOnConfigError', () => {
  it('exits 2 with the message a person can act on, without commander\u2019s "error: "', async () => {
    const { code, stderr } = await run(`
      service.exitOnConfigError('fencer-t', Object.assign(new Error("error: unknown option '--x'"), { code: 'commander.unknownOption' }));
    `).done;
    expect(code).toBe(2);
    expect(stderr).toBe("fencer-t: unknown option '--x'\n");
  });

  it('exits 0 after --help or --version', async () => {
    for (const c of ['commander.helpDisplayed', 'commander.version']) {
      const { code, stderr } = await run(`
        service.exitOnConfigError('fencer-t', Object.assign(new Error('(outputHelp)'), { code: '${c}' }));
      `).done;
      expect(code, c).toBe(0);
      expect(stderr, c).toBe('');
    }
  });
});

describe('stopOnSignals', () => {
  it('runs the stop once, however many signals arrive, and exits 0', async () => {
    const r = run(`
      const logger = service.createLogger('t', { sync: true });
      service.stopOnSignals(logger, async (signal) => {
        process.stdout.write('stopping ' + signal + '\\n');
        await new Promise((r) => setTimeout(r, 200));
      });
      setInterval(() => {}, 1_000);
      process.stdout.write('ready\\n');
    `);
    await r.said('ready');
    r.child.kill('SIGTERM');
    await r.said('stopping SIGTERM');
    r.child.kill('SIGINT');
    const { code, stdout } = await r.done;
    expect(code).toBe(0);
    expect(stdout).toBe('ready\nstopping SIGTERM\n');
  });

  it('exits 1, saying why, when the stop fails', async () => {
    const r = run(`
      const logger = service.createLogger('t', { sync: true });
      service.stopOnSignals(logger, async () => { throw new Error('cannot close'); });
      setInterval(() => {}, 1_000);
      process.stdout.write('ready\\n');
    `);
    await r.said('ready');
    r.child.kill('SIGINT');
    const { code, stderr } = await r.done;
    expect(code).toBe(1);
    expect(stderr).toMatch(/"msg":"stop failed"/);
    expect(stderr).toMatch(/cannot close/);
  });
});
