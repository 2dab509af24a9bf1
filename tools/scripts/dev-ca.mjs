#!/usr/bin/env node
// A development certificate authority and per-process certificates for
// mutual TLS, made with the `openssl` command (no ASN.1 by hand). Each
// certificate names what its holder is in a URI subject alternative name,
// which the receiving side checks (libs/service tls.ts):
//   fencer://cell/<cell-id>/<node-id>     a replica of one cell
//   fencer://router/<name>                a cell router
//   fencer://proxy/<name>                 a session proxy
//   fencer://control-plane/<name>         a control-plane instance
//   fencer://operator/<name>              a person or a CLI
// plus DNS:localhost and IP:127.0.0.1 so a local fleet's host names verify.
//
//   node tools/scripts/dev-ca.mjs --dir .fencer/tls --cell cell-1=n1,n2,n3 --router r1 --proxy p1 --control-plane cp1
//
// Files: <dir>/ca.crt, ca.key, and <name>.crt / <name>.key per holder
// (mode 0600 for keys). The CA is made once and reused; a holder's
// certificate is issued again on each run (a new file, which running
// processes pick up: they reload on change or SIGHUP). Never use this CA
// outside development: its key sits beside the certificates.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** A development CA lives ten years; a holder's certificate one year unless told. */
const caValidityDays = 3650;
const holderValidityDaysDefault = 365;

function openssl(args, cwd) {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const why =
      err.code === 'ENOENT' ? 'the openssl command is not installed (Debian: apt-get install openssl)' : String(err.stderr ?? err.message);
    throw new Error(`openssl ${args[0]} failed: ${why.trim()}`);
  }
}

/** Makes <dir>/ca.crt and ca.key unless both exist; returns their paths. */
export function ensureCa(dir) {
  mkdirSync(dir, { recursive: true });
  const caCrt = path.join(dir, 'ca.crt');
  const caKey = path.join(dir, 'ca.key');
  if (!existsSync(caCrt) || !existsSync(caKey)) {
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        caKey,
        '-out',
        caCrt,
        '-days',
        String(caValidityDays),
        '-subj',
        '/CN=fencer development CA',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
    chmodSync(caKey, 0o600);
  }
  return { caCrt, caKey };
}

/**
 * Issues <dir>/<name>.crt and <name>.key for one holder, signed by the CA in
 * `dir`, with `uris` as its URI SANs. `days` 0 makes a certificate whose
 * validity ends the second it is made (tests of the expired case).
 */
export function issue(dir, name, uris, { days = holderValidityDaysDefault } = {}) {
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error(`certificate name "${name}" may use only [A-Za-z0-9._-]`);
  const { caCrt, caKey } = ensureCa(dir);
  const work = mkdtempSync(path.join(os.tmpdir(), 'fencer-ca-'));
  try {
    const key = path.join(dir, `${name}.key`);
    const crt = path.join(dir, `${name}.crt`);
    const csr = path.join(work, 'req.csr');
    const ext = path.join(work, 'ext.cnf');
    const san = ['DNS:localhost', 'IP:127.0.0.1', ...uris.map((u) => `URI:${u}`)].join(',');
    writeFileSync(ext, `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n`);
    openssl(
      [
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        `/CN=${name}`,
      ],
      work,
    );
    chmodSync(key, 0o600);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        caCrt,
        '-CAkey',
        caKey,
        '-CAcreateserial',
        '-CAserial',
        path.join(dir, 'ca.srl'),
        '-days',
        String(days),
        '-out',
        crt,
        '-extfile',
        ext,
      ],
      work,
    );
    return { cert: crt, key, ca: caCrt };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The URI SAN of each kind of holder (libs/service tls.ts reads them back). */
export const identity = {
  replica: (cellId, nodeId) => `fencer://cell/${cellId}/${nodeId}`,
  router: (name) => `fencer://router/${name}`,
  proxy: (name) => `fencer://proxy/${name}`,
  controlPlane: (name) => `fencer://control-plane/${name}`,
  operator: (name) => `fencer://operator/${name}`,
};

async function main() {
  const { Command } = await import('commander');
  const collect = (v, acc) => [...acc, v];
  const program = new Command('dev-ca')
    .description('Make a development CA and per-process certificates for mutual TLS (openssl).')
    .requiredOption('--dir <dir>', 'where the CA and certificates are written')
    .option('--cell <cell=node,...>', 'replicas of a cell (repeatable)', collect, [])
    .option('--router <name>', 'a router (repeatable)', collect, [])
    .option('--proxy <name>', 'a session proxy (repeatable)', collect, [])
    .option('--control-plane <name>', 'a control-plane instance (repeatable)', collect, [])
    .option('--operator <name>', 'an operator or CLI (repeatable)', collect, [])
    .option('--days <n>', 'validity of each issued certificate, in days', String(holderValidityDaysDefault))
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));
  program.parse();
  const o = program.opts();
  const days = Number(o.days);
  if (!Number.isSafeInteger(days) || days < 0) {
    console.error(`dev-ca: --days must be a non-negative integer, got "${o.days}"`);
    process.exit(2);
  }
  const made = [];
  for (const spec of o.cell) {
    const m = /^([A-Za-z0-9._-]+)=([A-Za-z0-9._,-]+)$/.exec(spec);
    if (!m) {
      console.error(`dev-ca: --cell "${spec}" is not of the form cell=node,node`);
      process.exit(2);
    }
    for (const node of m[2].split(',').filter(Boolean)) made.push(issue(o.dir, node, [identity.replica(m[1], node)], { days }));
  }
  for (const [kind, names] of [
    ['router', o.router],
    ['proxy', o.proxy],
    ['controlPlane', o.controlPlane],
    ['operator', o.operator],
  ]) {
    for (const n of names) made.push(issue(o.dir, n, [identity[kind](n)], { days }));
  }
  ensureCa(o.dir);
  console.log(`dev-ca: CA ${path.join(o.dir, 'ca.crt')}; ${made.length} certificate(s) issued`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(`dev-ca: ${err.message}`);
    process.exit(1);
  });
}
