/**
 * Goal: every `fencer …` command docs/operations.md quotes exists as quoted:
 * its command path is a leaf command of the CLI (or a group quoted alone),
 * and every option it passes is one that command (or the root, for global
 * options) lists in its --help. A runbook step never names a command or a
 * flag an operator would find missing at 3 a.m.
 * Method: every line starting with `fencer ` in the document's sh blocks is
 * split into words; the longest prefix of words for which `fencer WORDS
 * --help` exits 0 with the usage line "Usage: fencer WORDS …" is its
 * command; its options are looked up in that help text. runCli runs
 * in-process (the function the fencer binary calls), its output captured.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT, runCli } from '@fencer/cli';
import { root } from './support.js';

const doc = readFileSync(path.join(root, 'docs/operations.md'), 'utf8');
/** The fencer commands of the sh blocks, without comments. */
const quoted = [...doc.matchAll(/```sh\n([\s\S]*?)```/g)]
  .flatMap((m) => m[1]!.split('\n'))
  .map((l) => l.replace(/\s+#.*$/, '').trim())
  .filter((l) => l.startsWith('fencer '));

async function help(words: readonly string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runCli([...words, '--help'], {
    stdout: (t) => (out += t),
    stderr: (t) => (out += t),
    env: {},
    cwd: root,
  });
  return { code, out };
}

/** Options that take a value at the root, before the command. */
const ROOT_VALUE_OPTIONS = new Set(['--timeout', '--endpoints', '--fleet']);

/** The command words and options of one quoted line, after the root options. */
function split(line: string): { rootOptions: string[]; words: string[] } {
  const tokens = line.split(/\s+/).slice(1);
  const rootOptions: string[] = [];
  while (tokens[0]?.startsWith('--')) {
    const o = tokens.shift()!;
    rootOptions.push(o);
    if (ROOT_VALUE_OPTIONS.has(o)) tokens.shift();
  }
  return { rootOptions, words: tokens };
}

async function commandOf(words: readonly string[]): Promise<{ path: string[]; helpText: string } | undefined> {
  const candidates = words.filter((w, i) => words.slice(0, i + 1).every((x) => /^[a-z][a-z-]*$/.test(x)));
  for (let n = candidates.length; n > 0; n--) {
    const pathWords = candidates.slice(0, n);
    const h = await help(pathWords);
    if (h.code === EXIT.OK && h.out.startsWith(`Usage: fencer ${pathWords.join(' ')} `)) return { path: pathWords, helpText: h.out };
  }
  return undefined;
}

describe('docs/operations.md', () => {
  it('quotes fencer commands (the runbooks and procedures name them)', () => {
    expect(quoted.length).toBeGreaterThan(20);
  });

  it('every quoted fencer command exists, with every option it passes', async () => {
    const rootHelp = (await help([])).out;
    const problems: string[] = [];
    for (const line of quoted) {
      const { rootOptions, words } = split(line);
      for (const o of rootOptions)
        if (!rootHelp.includes(`${o} `) && !rootHelp.includes(`${o}\n`)) problems.push(`${line}: no root option ${o}`);
      const found = await commandOf(words);
      if (!found) {
        problems.push(`${line}: no such command`);
        continue;
      }
      const group = /Usage: fencer [^\n]*\[command\]/.test(found.helpText);
      if (group && words.length > found.path.length) problems.push(`${line}: ${found.path.join(' ')} is a group, not a command`);
      for (const o of words.filter((w) => w.startsWith('--')))
        if (!new RegExp(`(^|[\\s,])${o}([\\s=<]|$)`, 'm').test(found.helpText))
          problems.push(`${line}: ${found.path.join(' ')} has no ${o}`);
    }
    expect(problems).toEqual([]);
  }, 60_000);

  it('a command or option that does not exist is caught', async () => {
    expect(await commandOf(['cell', 'frobnicate'])).toMatchObject({ path: ['cell'] });
    expect(await commandOf(['nonsense'])).toBeUndefined();
    const status = (await commandOf(['cell', 'status']))!;
    expect(status.helpText).toMatch(/--cell <id>/);
    expect(new RegExp(`(^|[\\s,])--no-such-flag([\\s=<]|$)`, 'm').test(status.helpText)).toBe(false);
  });
});
