#!/usr/bin/env node
// Generates libs/protocol/src/gen from proto/ with ts-proto, driven by buf
// (both installed from the npm registry; buf's binary ships inside its npm
// package, nothing is downloaded). With --check, generates into a temporary
// folder and fails when the committed output differs: generated code is
// committed and must be reproducible.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, existsSync, cpSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const committed = path.join(root, 'libs/protocol/src/gen');
const check = process.argv.includes('--check');

const options = [
  'outputServices=grpc-js',
  'esModuleInterop=true',
  'env=both',
  'forceLong=number',
  'importSuffix=.js',
  'outputJsonMethods=true',
  'outputPartialMethods=true',
  'useOptionals=none',
  'oneof=unions-value',
];

const out = mkdtempSync(path.join(tmpdir(), 'fencer-proto-'));
const template = {
  version: 'v2',
  plugins: [{ local: path.join(root, 'node_modules/.bin/protoc-gen-ts_proto'), out, opt: options }],
};
execFileSync(path.join(root, 'node_modules/.bin/buf'), ['generate', 'proto', '--template', JSON.stringify(template)], {
  cwd: root,
  stdio: 'inherit',
});

// uint64 fields decode to JS numbers (forceLong=number). ts-proto throws for a
// value beyond 2^53, which grpc-js turns into an INTERNAL "Error deserializing
// request": bad input must never be INTERNAL. So values beyond the safe range
// saturate instead (a TTL of 2^63 becomes 2^53-1, and the server clamps it).
const THROWING = `  if (num > globalThis.Number.MAX_SAFE_INTEGER) {
    throw new globalThis.Error("Value is larger than Number.MAX_SAFE_INTEGER");
  }
  if (num < globalThis.Number.MIN_SAFE_INTEGER) {
    throw new globalThis.Error("Value is smaller than Number.MIN_SAFE_INTEGER");
  }
  return num;`;
const SATURATING = `  // Patched by tools/scripts/gen-proto.mjs: saturate instead of throwing.
  if (num > globalThis.Number.MAX_SAFE_INTEGER) return globalThis.Number.MAX_SAFE_INTEGER;
  if (num < globalThis.Number.MIN_SAFE_INTEGER) return globalThis.Number.MIN_SAFE_INTEGER;
  return num;`;

function saturateLongs(dir) {
  for (const f of listFiles(dir)) {
    const file = path.join(dir, f);
    const text = readFileSync(file, 'utf8');
    if (!text.includes('function longToNumber(')) continue;
    if (!text.includes(THROWING)) throw new Error(`${f}: ts-proto's longToNumber changed shape; update gen-proto.mjs`);
    writeFileSync(file, text.replace(THROWING, SATURATING));
  }
}

function listFiles(dir, base = dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? listFiles(full, base) : [path.relative(base, full)];
  });
}

saturateLongs(out);

if (check) {
  const want = listFiles(out).sort();
  const have = listFiles(committed).sort();
  const problems = [];
  for (const f of new Set([...want, ...have])) {
    if (!want.includes(f)) problems.push(`stale file (no proto generates it): ${f}`);
    else if (!have.includes(f)) problems.push(`missing generated file: ${f}`);
    else if (!readFileSync(path.join(out, f)).equals(readFileSync(path.join(committed, f)))) problems.push(`out of date: ${f}`);
  }
  rmSync(out, { recursive: true, force: true });
  if (problems.length > 0) {
    console.error(
      `generated protocol code differs from proto/:\n  ${problems.join('\n  ')}\nRun \`npm run gen:proto\` and commit the result.`,
    );
    process.exit(1);
  }
  console.log(`generated protocol code is current (${want.length} files)`);
} else {
  rmSync(committed, { recursive: true, force: true });
  cpSync(out, committed, { recursive: true });
  rmSync(out, { recursive: true, force: true });
  console.log(`generated ${listFiles(committed).length} files into libs/protocol/src/gen`);
}
