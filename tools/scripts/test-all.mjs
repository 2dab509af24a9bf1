#!/usr/bin/env node
// The whole test suite, as `npm test` runs it: typecheck, `nx sync:check`,
// the project-graph check (no cycles), the generated-code check, format and lint, then every project's tests through nx. Each
// project's Vitest writes a JSON report to .reports/vitest/; the last line
// printed is the plain sum over all of them: `N passed, N failed, N skipped`.
// Just before it come the skipped tests, grouped by why: a test that needs a
// Debian package says so in its name ("needs Debian faketime"), and skips
// itself where the package is missing.
// With CI=true a skipped test fails the run: a test skips itself only when a
// tool it needs is missing, and CI must never go green without its faults.
// Extra arguments go to `nx run-many` (e.g. `--projects=raft`).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const reports = path.join(root, '.reports/vitest');
const nx = path.join(root, 'node_modules/.bin/nx');
const extra = process.argv.slice(2);

let passed = 0;
let failed = 0;
let skipped = 0;
const inCi = process.env.CI === 'true';
const failures = [];
/** Why → the skipped tests (project, file and full name) with that reason. */
const skippedWhy = new Map();

/** The reason a skipped test gives in its name, or that it gives none. */
function skipReason(fullName) {
  const pkg = /needs Debian ([A-Za-z0-9.+-]+)/.exec(fullName)?.[1];
  if (pkg !== undefined) return `needs Debian ${pkg} (apt-get install ${pkg}); .ci/run installs it`;
  return 'no reason in its name (it.skip, or a skipIf whose test does not say what it needs)';
}

function noteSkipped(project, report) {
  for (const file of report.testResults ?? []) {
    for (const t of file.assertionResults ?? []) {
      if (!['skipped', 'pending', 'todo'].includes(t.status)) continue;
      const why = t.status === 'todo' ? 'todo' : skipReason(t.fullName ?? t.title ?? '');
      const list = skippedWhy.get(why) ?? [];
      list.push(`${project}: ${path.relative(root, file.name)} > ${[...(t.ancestorTitles ?? []), t.title].join(' > ')}`);
      skippedWhy.set(why, list);
    }
  }
}

function step(name, command, args, env = {}) {
  console.log(`\n=== ${name}: ${[command, ...args].join(' ')}`);
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  return r.status === 0;
}

function check(name, command, args) {
  if (step(name, command, args)) passed++;
  else {
    failed++;
    failures.push(name);
  }
}

check('typecheck', nx, ['run-many', '-t', 'typecheck', '--output-style=static', ...extra]);
check('nx sync:check', nx, ['sync:check']);
check('project graph', process.execPath, [path.join(root, 'tools/scripts/check-graph.mjs')]);
check('generated protocol code', process.execPath, [path.join(root, 'tools/scripts/gen-proto.mjs'), '--check']);
check('format (prettier --check)', path.join(root, 'node_modules/.bin/prettier'), ['--check', '--log-level=warn', '.']);
check('lint (eslint, type-aware)', path.join(root, 'node_modules/.bin/eslint'), ['--max-warnings=0', '.']);

rmSync(reports, { recursive: true, force: true });
const projectsJson = spawnSync(nx, ['show', 'projects', '--with-target', 'test', '--json'], { cwd: root, encoding: 'utf8' });
const projects = JSON.parse(projectsJson.stdout || '[]');
const testsOk = step('tests', nx, ['run-many', '-t', 'test', '--output-style=static', ...extra, '--', '--run'], { FORCE_COLOR: '0' });

const onlyProjects = extra
  .find((a) => a.startsWith('--projects='))
  ?.slice('--projects='.length)
  .split(',');
for (const project of projects) {
  if (onlyProjects && !onlyProjects.includes(project)) continue;
  const file = path.join(reports, `${project}.json`);
  if (!existsSync(file)) {
    // A project whose run crashed before reporting (or was never run because a dependency failed).
    failed++;
    failures.push(`${project}: no test report`);
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  const projectSkipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  skipped += projectSkipped;
  noteSkipped(project, report);
  if (projectSkipped > 0 && inCi)
    failures.push(`${project}: ${projectSkipped} skipped tests (CI=true allows none: is a Debian package from .ci/run missing?)`);
  // A suite that fails to load counts its file once.
  const brokenFiles = (report.testResults ?? []).filter((f) => f.status === 'failed' && (f.assertionResults ?? []).length === 0);
  failed += brokenFiles.length;
  if (report.numFailedTests > 0 || brokenFiles.length > 0)
    failures.push(`${project}: ${report.numFailedTests} failed tests, ${brokenFiles.length} broken files`);
}
if (!testsOk && failed === 0) {
  failed++;
  failures.push('nx run-many -t test exited non-zero');
}

console.log(`\nprojects: ${readdirSync(reports, { withFileTypes: false }).length} reports`);
if (failures.length > 0) console.log(`failures:\n  ${failures.join('\n  ')}`);
if (skippedWhy.size > 0) {
  console.log(`skipped tests${inCi ? ' (CI=true: each counts as a failure)' : ''}:`);
  for (const [why, tests] of skippedWhy) console.log(`  ${why}:\n    ${tests.join('\n    ')}`);
}
if (inCi && skipped > 0) failed += skipped;
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed === 0 ? 0 : 1);
