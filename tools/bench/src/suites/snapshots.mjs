// The snapshots suite: what a cell snapshot costs on its way to object
// storage and back (docs/decisions/0014-snapshots-in-object-storage.md).
// A lock table of --locks live locks (one holder each) is built in
// @fencer/lock-fsm and snapshotted: its size per million locks (a replica
// builds it whole in memory); the replica's snapshot file is written through
// @fencer/wal's store; @fencer/object-store publishes it (upload, read-back
// check, manifest) to s3rver (S3 API, a child process on 127.0.0.1) and to a
// local folder: MB/s; then `fencer cell restore` (the CLI as a process, as an
// operator runs it) rebuilds a five-replica cell's folders from S3: seconds.
// Rounds alternate the stores; each row shows its median round.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildProject, thisBuild } from '../systems/builds.mjs';
import { common, count, numeric, resolve } from '../options.mjs';
import { commandLine, fmt, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';
import { median } from '../measure.mjs';

const LOCKS_PER_SESSION = 1_000;
const SESSIONS_PER_NAMESPACE = 100;
const REPLICAS = 5;
const MB = 1e6;

export function register(program) {
  const cmd = program
    .command('snapshots')
    .description('cell snapshots: size per million locks, publish MB/s to S3 (s3rver) and a folder, `fencer cell restore` time');
  numeric(cmd, '--locks <n>', 'live locks in the snapshotted lock table', 1_000_000, 100_000, count);
  numeric(cmd, '--rounds <n>', 'rounds; rows show their median', 3, 1, count);
  cmd.option('--dir <dir>', 'where the files go', os.tmpdir()).option('--no-build', 'measure the tree as built');
  common(cmd);
  cmd.action(() => runSnapshots(resolve(cmd)));
  return cmd;
}

/** A lock table of `locks` live exclusive locks, through the state machine's own commands. */
function lockTable(lockFsm, base, locks) {
  const fsm = new lockFsm.LockStateMachine({ autoClaim: true });
  let index = 0;
  const sessions = Math.ceil(locks / LOCKS_PER_SESSION);
  for (let s = 0; s < sessions; s++) {
    const namespace = base.Namespace(`bench${Math.floor(s / SESSIONS_PER_NAMESPACE)}`);
    const sessionId = base.SessionId(`${namespace}:s${s}`);
    fsm.apply(++index, { kind: 'OpenSession', sessionId, clientId: 'bench', namespace, ttlMs: 10_000 });
    for (let l = 0; l < LOCKS_PER_SESSION && s * LOCKS_PER_SESSION + l < locks; l++) {
      const name = `/ls/${namespace}/lock-${s}-${l}`;
      fsm.apply(++index, {
        kind: 'Acquire',
        sessionId,
        name,
        mode: 'EXCLUSIVE',
        requestId: base.RequestId(`r${l}`),
        waitMs: 0,
        lockDelayMs: 0,
        tryLock: true,
      });
    }
  }
  return fsm;
}

/** The replica's snapshot file, written by @fencer/wal's store as a replica writes it; returns its path. */
async function snapshotFile(wal, work, fsm) {
  const dir = path.join(work, 'replica');
  const store = await new Promise((res, rej) => wal.openRaftLogStore(new wal.NodeDisk(), dir, {}, (e, s) => (e ? rej(e) : res(s))));
  const voters = Array.from({ length: REPLICAS }, (_, i) => `old-${i + 1}`);
  const snapshot = { meta: { index: fsm.appliedIndex, term: 1, conf: { voters, learners: [] } }, data: fsm.snapshot() };
  await new Promise((res, rej) => store.saveSnapshot(snapshot, (e) => (e ? rej(e) : res())));
  await new Promise((res, rej) => store.close((e) => (e ? rej(e) : res())));
  return path.join(
    dir,
    fs.readdirSync(dir).find((n) => n.endsWith('.snap')),
  );
}

async function publishOnce(objectStore, store, file, info) {
  const t0 = performance.now();
  const published = await objectStore.publishSnapshot(store, info, fs.createReadStream(file), Date.now());
  return { seconds: (performance.now() - t0) / 1000, location: published.location };
}

function restoreOnce(cliMain, env, location, s3, target) {
  const replicas = Array.from({ length: REPLICAS }, (_, i) => `n${i + 1}=127.0.0.1:${40_001 + i}`).join(',');
  const args = [cliMain, 'cell', 'restore', '--from', location, '--cell', 'cell-1', '--data-dir', target, '--replicas', replicas];
  args.push('--s3-endpoint', s3.endpoint, '--s3-path-style');
  const t0 = performance.now();
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.once('exit', (code) =>
      code === 0 ? res((performance.now() - t0) / 1000) : rej(new Error(`fencer cell restore exited ${code}: ${err}`)),
    );
  });
}

async function measure(libs, work, o) {
  const { base, lockFsm, wal, objectStore, testing } = libs;
  let t0 = performance.now();
  const fsm = lockTable(lockFsm, base, o.locks);
  const buildS = (performance.now() - t0) / 1000;
  t0 = performance.now();
  const dataBytes = fsm.snapshot().length;
  const snapshotS = (performance.now() - t0) / 1000;
  const file = await snapshotFile(wal, work, fsm);
  const fileBytes = fs.statSync(file).size;
  const head = lockFsm.readSnapshotHead(fsm.snapshot());
  const info = {
    cell: 'cell-1',
    index: fsm.appliedIndex,
    term: 1,
    voters: ['old-1'],
    learners: [],
    revisionBase: head.revisionBase,
    lastRevision: head.lastRevision,
    bytes: fileBytes,
  };
  const s3 = await testing.startS3rver(path.join(work, 's3rver'));
  const env = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };
  const rounds = { s3: [], folder: [], restore: [] };
  try {
    const s3Store = s3.store('bench');
    const folder = new objectStore.FileObjectStore(path.join(work, 'folder'));
    let location = '';
    for (let r = 0; r < o.rounds; r++) {
      const up = await publishOnce(objectStore, s3Store, file, info);
      rounds.s3.push(fileBytes / MB / up.seconds);
      location = up.location;
      rounds.folder.push(fileBytes / MB / (await publishOnce(objectStore, folder, file, info)).seconds);
      const target = path.join(work, `restored-${r}`);
      rounds.restore.push(await restoreOnce(libs.cliMain, env, location, s3, target));
      fs.rmSync(target, { recursive: true, force: true });
    }
    s3Store.close();
  } finally {
    await s3.stop();
  }
  return { locks: o.locks, buildS, snapshotS, dataBytes, fileBytes, bytesPerMillion: (dataBytes * 1e6) / o.locks, rounds };
}

function render(meta, m, o) {
  const med = (xs) => median(xs);
  const rows = [
    [
      'lock state snapshot (one buffer, built whole)',
      `${fmt.fixed(m.dataBytes / MB, 1)} MB`,
      `${fmt.fixed(m.bytesPerMillion / MB, 1)} MB per million locks`,
      `${fmt.ms(m.snapshotS * 1000)} to encode`,
    ],
    [
      'publish to S3 (s3rver): upload, read-back check, manifest',
      `${fmt.fixed(med(m.rounds.s3), 1)} MB/s`,
      m.rounds.s3.map((x) => fmt.fixed(x, 1)).join(' / '),
      '',
    ],
    [
      'publish to a local folder (file://)',
      `${fmt.fixed(med(m.rounds.folder), 1)} MB/s`,
      m.rounds.folder.map((x) => fmt.fixed(x, 1)).join(' / '),
      '',
    ],
    [
      `\`fencer cell restore\` from S3, ${REPLICAS} replicas`,
      `${fmt.fixed(med(m.rounds.restore), 1)} s`,
      m.rounds.restore.map((x) => fmt.fixed(x, 1)).join(' / '),
      '',
    ],
  ];
  return [
    '## Snapshots',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 10)}: Node ${meta.node}, ${meta.cpu}, load ${meta.loadStart} → ${meta.loadEnd}; a lock table of ${fmt.int(m.locks)} live exclusive locks (${LOCKS_PER_SESSION} per session), its replica snapshot file ${fmt.fixed(m.fileBytes / MB, 1)} MB; ${o.rounds} rounds, median shown. S3 is s3rver on 127.0.0.1 (a Node process: its own speed bounds these figures, not the network).`,
    '',
    markdownTable(['what', 'median', 'rounds', 'note'], rows),
    '',
    "A replica builds a snapshot whole in memory: the lock state machine encodes the state into one buffer, and the WAL copies it into the snapshot file's buffer, so taking one needs about twice the size above, on top of the lock table itself. The path out of the replica (ReadSnapshot streams the file in chunks) and into object storage is bounded whatever the size; a restore reads the snapshot whole, as a replica does when it starts.",
    '',
  ].join('\n');
}

export async function runSnapshots(o) {
  if (o.build) for (const p of ['object-store', 'lock-fsm', 'wal', 'cli']) buildProject(p);
  const build = thisBuild();
  const libs = {
    base: await import(build.lib('base')),
    lockFsm: await import(build.lib('lock-fsm')),
    wal: { ...(await import(build.lib('wal'))), ...(await import(build.lib('wal', 'node'))) },
    objectStore: await import(build.lib('object-store')),
    testing: await import(build.lib('object-store', 'testing')),
    cliMain: path.join(build.root, 'apps/cli/dist/main.js'),
  };
  const meta = Object.assign(machineMeta(), { command: commandLine() });
  const work = fs.mkdtempSync(path.join(o.dir, 'fencer-snapshots-bench-'));
  try {
    const m = await measure(libs, work, o);
    meta.end();
    const body = render(meta, m, o);
    console.log(body);
    if (o.json) writeJson(o.json, { meta, opts: o, result: m });
    const rows = [
      {
        id: 'snapshots-upload',
        figure: `Snapshot publish to S3 (s3rver), ${fmt.fixed(m.fileBytes / MB, 0)} MB: MB/s`,
        value: `${fmt.fixed(median(m.rounds.s3), 1)} MB/s`,
        command: meta.command,
      },
      {
        id: 'snapshots-restore',
        figure: `\`fencer cell restore\` of ${fmt.int(m.locks)} locks from S3, ${REPLICAS} replicas`,
        value: `${fmt.fixed(median(m.rounds.restore), 1)} s`,
        command: meta.command,
      },
      {
        id: 'snapshots-size',
        figure: 'Lock state snapshot size per million locks',
        value: `${fmt.fixed(m.bytesPerMillion / MB, 1)} MB`,
        command: meta.command,
      },
    ];
    writeDocs({ name: 'snapshots', body, rows, keepNotes: true, write: o.write });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
