// The systems a run can compare, all behind one interface:
//
//   start() / stop()            fresh processes on 127.0.0.1, fsync on; stop() ends every one (by PID)
//   leader() → { id, pid }      waits for a leader; leaderPid() the last one seen
//   pids()                      the live server processes, for CPU
//   killLeader() / restartKilled()   kill -9 of the leader, and its restart and catch-up
//   openSession(ttlS) → session with lock / tryLock / unlock / read / close
//   openManySessions(n, ttlS), keepAliveWire(), keepAliveTargets(spread)   for the KeepAlive generator
//   watch(i, prefix, onEvent)   watcher i, on the member its clients would use
//   supports(scenario) / supportNote(scenario)   scenarios it has no counterpart for
//   failures                    calls that failed and were retried
//
// Clients are spread over members as each system's clients are: Fencer's
// follow the leader (a cell) or call the routers and proxies (a fleet),
// ZooKeeper's connect to a server of the client library's choosing, etcd's
// call its leader.
import { FencerCell } from './fencer-cell.mjs';
import { FencerFleet } from './fencer-fleet.mjs';
import { EtcdSystem } from './etcd.mjs';
import { otherBuild } from './builds.mjs';

export const SYSTEM_NAMES = {
  fencer: 'a Fencer cell of 5 replicas, clients straight to its leader',
  fleet: "Fencer's local fleet (2 cells of 5, 1 router, 2 proxies), clients through the router and proxies",
  etcd5: 'etcd, 5 members',
  etcd3: 'etcd, 3 members',
  zk3: 'ZooKeeper, 3 servers',
};

/** Port bases of the Fencer cells of one run, so two cells never probe the same range. */
const CELL_PORT_BASE = { fencer: 11_000, 'fencer-baseline': 12_000, 'fencer-compare': 13_000 };

/** Words of --compare-args: NAME=value words set the compared cell's environment, the rest are cell-node flags. */
export function compareWords(text) {
  const words = text.split(/\s+/).filter(Boolean);
  const isEnv = (w) => /^[A-Z_][A-Z0-9_]*=/.test(w);
  return {
    env: Object.fromEntries(words.filter(isEnv).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)])),
    extraArgs: words.filter((w) => !isEnv(w)),
  };
}

function fencerSystems(name, o, base) {
  const twin = o.baseline ? otherBuild(o.baseline, o.baselineLabel) : undefined;
  if (name === 'fleet') {
    const shape = { keepData: o.keepData, proxyIntervalMs: o.proxyIntervalMs };
    return [
      new FencerFleet(shape),
      ...(twin ? [new FencerFleet({ ...shape, build: twin, key: 'fencer-fleet-baseline', label: `Fencer fleet, ${twin.label}` })] : []),
    ];
  }
  const cell = { keepData: o.keepData };
  const out = [new FencerCell({ ...cell, cpuProfDir: o.cpuProf, portBase: base.fencer })];
  if (twin)
    out.push(
      new FencerCell({ ...cell, build: twin, key: 'fencer-baseline', label: `Fencer, ${twin.label}`, portBase: base['fencer-baseline'] }),
    );
  if (o.compareArgs) {
    const label = o.compareLabel ?? `Fencer, ${o.compareArgs}`;
    out.push(new FencerCell({ ...cell, ...compareWords(o.compareArgs), key: 'fencer-compare', label, portBase: base['fencer-compare'] }));
  }
  return out;
}

/** The systems named (Fencer's first, in the order given; then the others), with their baseline and compared twins. */
export async function makeSystems(names, o) {
  const unknown = names.filter((n) => !(n in SYSTEM_NAMES));
  if (unknown.length) throw new Error(`unknown system ${unknown.join(', ')}: use ${Object.keys(SYSTEM_NAMES).join(', ')}`);
  const fencer = names.filter((n) => n === 'fencer' || n === 'fleet').flatMap((n) => fencerSystems(n, o, CELL_PORT_BASE));
  const others = [];
  for (const n of names) {
    if (n.startsWith('etcd')) others.push(new EtcdSystem(Number(n.slice(4)), { keepData: o.keepData }));
    if (n === 'zk3') {
      const { ZkSystem } = await import('./zk.mjs');
      others.push(new ZkSystem(3, { keepData: o.keepData }));
    }
  }
  return [...fencer, ...others];
}
