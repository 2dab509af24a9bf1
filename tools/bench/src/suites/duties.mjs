// The duties suite: the cost of the leader's deadline tracking
// (@fencer/cell's LeaderDuties), one `due()` call, which the cell node makes
// on every Raft tick, with N live sessions that each heartbeat every TTL/3
// (the SDK's pace), over a minute of virtual time. None expires, so every
// figure is pure bookkeeping. With --baseline, another checkout's build of
// the library is measured in the same run, alternating with this one.
import { buildProject, otherBuild, thisBuild } from '../systems/builds.mjs';
import { baseline, common, list, resolve } from '../options.mjs';
import { commandLine, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';
import { median } from '../measure.mjs';
import { Option } from 'commander';

const TTL_MS = 12_000;
const TICK_MS = 100;
const TICKS = 600;
/** Rounds per build and size; the median round is reported. */
const ROUNDS = 3;

export function register(program) {
  const cmd = program.command('duties').description("@fencer/cell's LeaderDuties: CPU of one due() call per tick, by live sessions");
  cmd
    .addOption(new Option('--sessions <list>', 'live session counts').argParser(list).default(['10000', '100000'], '10000,100000'))
    .option('--no-build', 'measure libs/cell as built (skip `nx build cell`)');
  baseline(cmd, "its LeaderDuties, rounds alternating with this build's");
  common(cmd, { quick: false });
  cmd.action(() => runDuties(resolve(cmd)));
  return cmd;
}

/** Mean µs of CPU per due() call over TICKS ticks with n sessions. */
function measure(LeaderDuties, n) {
  const d = new LeaderDuties();
  const ids = Array.from({ length: n }, (_, i) => `ns:${i}`);
  d.becomeLeader(
    0,
    ids.map((sessionId) => ({ sessionId, ttlMs: TTL_MS })),
    [],
    [],
  );
  const beatsPerTick = Math.ceil(n / (TTL_MS / 3 / TICK_MS));
  let now = 0;
  let next = 0;
  let spent = 0;
  for (let t = 0; t < TICKS; t++) {
    now += TICK_MS;
    for (let k = 0; k < beatsPerTick; k++) d.heartbeat(now, ids[next++ % n]);
    const started = process.cpuUsage();
    const out = d.due(now);
    const used = process.cpuUsage(started);
    spent += used.user + used.system;
    if (out.length > 0) throw new Error(`${out.length} sessions expired: the workload is wrong`);
  }
  return spent / TICKS;
}

function render(meta, builds, rows) {
  const head = ['live sessions', ...builds.map((b) => `\`due()\`, ${b.label}`), `per second of ticks (${builds[0].label})`];
  const body = rows.map((r) => [
    r.n.toLocaleString('en-US'),
    ...r.medians.map((m) => `${m.toFixed(0)} µs`),
    `${((r.medians[0] * (1000 / TICK_MS)) / 1000).toFixed(1)} ms`,
  ]);
  return [
    '## Leader duties: deadline tracking',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 10)}: Node ${meta.node}, ${meta.cpu}, load average ${meta.loadStart}. The leader calls \`LeaderDuties.due()\` on every ${TICK_MS} ms tick; every session here heartbeats every TTL/3 (TTL ${TTL_MS / 1000} s) and none expires, over ${TICKS} ticks. CPU time per call, median of ${ROUNDS} rounds${builds.length > 1 ? ' alternating the builds' : ''}.`,
    '',
    markdownTable(head, body),
    '',
  ].join('\n');
}

export async function runDuties(o) {
  if (o.build) buildProject('cell');
  const builds = [{ label: 'this build', lib: await import(thisBuild().lib('cell')) }];
  if (o.baseline) {
    const other = otherBuild(o.baseline, o.baselineLabel);
    builds.push({ label: other.label, lib: await import(other.lib('cell')) });
  }
  const meta = Object.assign(machineMeta(), { command: commandLine() });
  const rows = [];
  for (const n of o.sessions.map(Number)) {
    const per = builds.map(() => []);
    for (let round = 0; round < ROUNDS; round++) builds.forEach((b, i) => per[i].push(measure(b.lib.LeaderDuties, n)));
    rows.push({ n, medians: per.map(median) });
    console.log(
      `${n.toLocaleString('en-US')} sessions: ${builds.map((b, i) => `${b.label} ${rows.at(-1).medians[i].toFixed(0)} µs`).join(', ')} of CPU per due() call`,
    );
  }
  meta.end();
  const body = render(meta, builds, rows);
  if (o.json) writeJson(o.json, { meta, rows });
  const largest = rows.at(-1);
  const row = {
    id: 'duties-100000',
    figure: `Leader duties: CPU of one due() per tick, ${largest.n.toLocaleString('en-US')} live sessions`,
    value: `${largest.medians[0].toFixed(0)} µs`,
    command: meta.command,
  };
  writeDocs({ name: 'duties', body, rows: [row], keepNotes: true, write: o.write });
}
