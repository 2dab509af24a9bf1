// The lock-fsm suite's section of docs/benchmarks.md and its summary rows.
import { REFERENCE_NS_BEFORE } from './lock-fsm-measure.mjs';
import { markdownTable } from '../report.mjs';

/** The target: applied entries per CPU-second (median of the trials). */
export const TARGET_ENTRIES_PER_S = 500_000;

const int = (n) => Math.round(n).toLocaleString('en-US');
const pct = (x) => `${(100 * x).toFixed(0)}%`;

/** What a run measures, filled in as it goes. */
export function buildMeasurePlan(o, beforeLabel) {
  return { entries: o.entries, locks: o.locks, trials: o.trials, beforeLabel };
}

function mainRows(m) {
  const { tp, single, mem } = m;
  const met = tp.cpuMedian >= TARGET_ENTRIES_PER_S;
  return [
    [
      'apply throughput per second of process CPU time (the figure the target is judged on)',
      `**${int(tp.cpuMedian)} entries/s** median of ${m.trials} trials of ${int(m.entries)} entries (best ${int(tp.cpuBest)}); target ${int(TARGET_ENTRIES_PER_S)} ${met ? '**met**' : '**missed**'}`,
    ],
    [
      `the same, scaled to the machine speed of the reference run (reference loop ${REFERENCE_NS_BEFORE} ns; ${tp.calibrationMin.toFixed(1)}-${tp.calibrationMax.toFixed(1)} ns before this run's trials)`,
      `${int(tp.scaledMedian)} entries/s median`,
    ],
    ['the same, wall clock', `${int(tp.median)} entries/s median (best ${int(tp.best)})`],
    [
      'the same, V8 run with `--single-threaded-gc` (all work, GC included, on one thread), per CPU-second',
      `${int(single.cpuMedian)} entries/s median (best ${int(single.cpuBest)}; scaled ${int(single.scaledMedian)})`,
    ],
    [
      'of which: decode alone / apply of pre-decoded commands, per CPU-second',
      `${int(tp.decodeCpuRate)} / ${int(tp.applyCpuRate)} entries/s`,
    ],
    [
      'garbage collection during the trials',
      `${pct(tp.gcShare)} of wall time in main-thread pauses; ${tp.minorGcsPerTrial.toFixed(0)} scavenges and ${tp.majorGcsPerTrial.toFixed(1)} mark-compacts per trial`,
    ],
    ['entry size in that mix', `${m.entryBytes.toFixed(1)} bytes on average`],
    [
      `memory per live lock with one holder (${int(m.locks)} live exclusive locks, ${mem.sessionCount} sessions, heapUsed after GC)`,
      `**${mem.bytesPerLock.toFixed(0)} bytes**`,
    ],
    [
      `snapshot of those ${int(m.locks)} locks`,
      `${(mem.snapshotBytes / 2 ** 20).toFixed(1)} MiB, encoded in ${mem.snapshotSeconds.toFixed(2)} s`,
    ],
  ];
}

function beforeAfter(m) {
  const { tp, before } = m;
  if (!before)
    return ['No baseline build was measured in this run; give `--baseline DIR` (a built checkout) for a same-run comparison.', ''];
  return [
    '### Before and after, this run',
    '',
    `"Before" is ${m.beforeLabel}, measured in the same process on the same workload, its trials alternating with this build's so that both saw the same machine.`,
    '',
    markdownTable(
      ['', 'before', 'after'],
      [
        [
          'apply throughput per CPU-second, median',
          `${int(before.cpuMedian)} entries/s`,
          `**${int(tp.cpuMedian)} entries/s** (${(tp.cpuMedian / before.cpuMedian).toFixed(2)}x)`,
        ],
        ['the same, wall clock', `${int(before.median)} entries/s`, `${int(tp.median)} entries/s`],
        [
          'decode alone / apply of decoded commands, per CPU-second',
          `${int(before.decodeCpuRate)} / ${int(before.applyCpuRate)} entries/s`,
          `${int(tp.decodeCpuRate)} / ${int(tp.applyCpuRate)} entries/s`,
        ],
        [
          'garbage collection: main-thread pauses, scavenges per trial',
          `${pct(before.gcShare)} of wall time, ${before.minorGcsPerTrial.toFixed(0)}`,
          `${pct(tp.gcShare)}, ${tp.minorGcsPerTrial.toFixed(0)}`,
        ],
      ],
      ['l', 'l', 'l'],
    ),
    '',
  ];
}

export function renderLockFsm(meta, m) {
  const body = [
    '## Lock state machine',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 10)}: Node ${meta.node}, ${meta.cpu} shared with other work (load average ${meta.loadStart} when the run began). Machine speed: the reference loop (a Map set and get and one small allocation) took ${m.calibrationNs.toFixed(1)} ns per iteration of CPU time: run the suite elsewhere and compare that line to scale the figures below.`,
    '',
    'Workload: 1,000 sessions; 70% uncontended acquires and releases with 1,000 locks live, 30% queue-and-promote on 64 hot names; pre-encoded entries fed through `applyEntry` (decode, apply, events), as a replica applies committed entries.',
    '',
    markdownTable(['measure', 'result'], mainRows(m), ['l', 'l']),
    '',
    ...beforeAfter(m),
  ].join('\n');
  const rows = [
    {
      id: 'lock-fsm-apply',
      figure: 'Lock state machine: applied entries per CPU-second (acquire/release mix)',
      value: `${int(m.tp.cpuMedian)} (target ${int(TARGET_ENTRIES_PER_S)})`,
      command: meta.command,
    },
    {
      id: 'lock-fsm-memory',
      figure: 'Lock state machine: memory per live lock with one holder',
      value: `${m.mem.bytesPerLock.toFixed(0)} bytes`,
      command: meta.command,
    },
  ];
  return { body, row: rows };
}
