#!/usr/bin/env node
// Generates code from proto/, all of it committed and reproducible:
// - libs/protocol/src/gen: messages, services and enums with ts-proto, driven
//   by buf (both installed from the npm registry; buf's binary ships inside
//   its npm package, nothing is downloaded);
// - libs/contract/src/gen/wire-enums.ts: the client contract's enum numbers
//   as `as const` objects, parsed with protobufjs, so the pure libs name the
//   wire numbers without depending on the protocol package and nobody copies
//   a number by hand.
// With --check, generates into memory or a temporary folder and fails when
// the committed output differs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, existsSync, cpSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const committed = path.join(root, 'libs/protocol/src/gen');
const check = process.argv.includes('--check');

// The protos whose enums are the client contract's (lockservice) or travel
// with it (admin, internal heartbeat); raft.proto is the peer protocol only.
const CONTRACT_PROTOS = [
  'proto/lockservice/v1/lockservice.proto',
  'proto/fencer/admin/v1/admin.proto',
  'proto/fencer/internal/v1/heartbeat.proto',
];
const contractDir = path.join(root, 'libs/contract/src/gen');
const contractEnumsFile = 'wire-enums.ts';

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

/** Every enum a proto file declares itself (not its imports), in declaration order. */
function enumsOf(file) {
  const rootNs = new protobuf.Root().loadSync(path.join(root, file), { keepCase: true, alternateCommentMode: true });
  const found = [];
  const walk = (ns) => {
    for (const o of ns.nestedArray) {
      if (o instanceof protobuf.Enum && path.resolve(o.filename) === path.join(root, file)) found.push(o);
      if (o.nestedArray) walk(o);
    }
  };
  walk(rootNs);
  return found;
}

/** LockMode -> LOCK_MODE_: the prefix buf's lint requires on every value, which the generated keys drop. */
function valuePrefix(enumName) {
  return `${enumName.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}_`;
}

function renderEnum(e, file) {
  const prefix = valuePrefix(e.name);
  const lines = [`/** ${e.fullName.slice(1)} (${file}) */`, `export const ${e.name} = {`];
  for (const [key, number] of Object.entries(e.values)) {
    if (!key.startsWith(prefix)) throw new Error(`${file}: ${e.name}.${key} lacks the ${prefix} prefix; gen-proto strips it`);
    const comment = e.comments[key];
    if (comment) lines.push(`  /** ${comment.replace(/\*\//g, '* /')} */`);
    lines.push(`  ${key.slice(prefix.length)}: ${number},`);
  }
  lines.push('} as const;', `export type ${e.name} = (typeof ${e.name})[keyof typeof ${e.name}];`);
  return lines.join('\n');
}

function contractEnumsText() {
  const names = new Set();
  const blocks = [];
  for (const file of CONTRACT_PROTOS) {
    for (const e of enumsOf(file)) {
      if (names.has(e.name)) throw new Error(`${file}: a second enum named ${e.name}; the contract's names must be unique`);
      names.add(e.name);
      blocks.push(renderEnum(e, file));
    }
  }
  const header = [
    '// Generated by tools/scripts/gen-proto.mjs from the protos with protobufjs: do not edit.',
    '// `npm run gen:proto` rewrites it; `npm run check:proto` (part of `npm test`) fails when it is stale.',
    '// Keys are the proto value names without their enum prefix: LockMode.EXCLUSIVE is LOCK_MODE_EXCLUSIVE.',
  ];
  return `${header.join('\n')}\n\n${blocks.join('\n\n')}\n`;
}

const enumsText = contractEnumsText();

/** What differs between the committed contract enums and the protos. */
function contractEnumProblems() {
  const have = listFiles(contractDir);
  const problems = have.filter((f) => f !== contractEnumsFile).map((f) => `stale file (no proto generates it): libs/contract/src/gen/${f}`);
  if (!have.includes(contractEnumsFile)) problems.push(`missing generated file: libs/contract/src/gen/${contractEnumsFile}`);
  else if (readFileSync(path.join(contractDir, contractEnumsFile), 'utf8') !== enumsText)
    problems.push(`out of date: libs/contract/src/gen/${contractEnumsFile}`);
  return problems;
}

if (check) {
  const want = listFiles(out).sort();
  const have = listFiles(committed).sort();
  const problems = [];
  for (const f of new Set([...want, ...have])) {
    if (!want.includes(f)) problems.push(`stale file (no proto generates it): ${f}`);
    else if (!have.includes(f)) problems.push(`missing generated file: ${f}`);
    else if (!readFileSync(path.join(out, f)).equals(readFileSync(path.join(committed, f)))) problems.push(`out of date: ${f}`);
  }
  problems.push(...contractEnumProblems());
  rmSync(out, { recursive: true, force: true });
  if (problems.length > 0) {
    console.error(
      `generated protocol code differs from proto/:\n  ${problems.join('\n  ')}\nRun \`npm run gen:proto\` and commit the result.`,
    );
    process.exit(1);
  }
  console.log(`generated protocol code is current (${want.length} files, and libs/contract/src/gen/${contractEnumsFile})`);
} else {
  rmSync(committed, { recursive: true, force: true });
  cpSync(out, committed, { recursive: true });
  rmSync(out, { recursive: true, force: true });
  console.log(`generated ${listFiles(committed).length} files into libs/protocol/src/gen`);
  rmSync(contractDir, { recursive: true, force: true });
  mkdirSync(contractDir, { recursive: true });
  writeFileSync(path.join(contractDir, contractEnumsFile), enumsText);
  console.log(`generated libs/contract/src/gen/${contractEnumsFile}`);
}
