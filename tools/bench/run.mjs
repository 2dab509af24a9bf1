#!/usr/bin/env node
// Fencer's benchmarks, one entry: `node tools/bench/run.mjs <suite> [options]`
// (`npm run bench -- [options]` builds first and runs the default run:
// the cell suite with those options, then the failover suite). `--help` lists the suites; `help <suite>` its options. Suites:
// cell (Fencer against etcd and ZooKeeper), fleet (router overhead and
// heartbeats through the proxies), wal, lock-fsm, duties (micro-benchmarks
// of one library each), snapshots (object storage and restore), moves
// (tenant moves between cells) and profile (summarises a V8 CPU profile).
//
// Needs the tree built (`npx nx run-many -t build`) and, for the peers,
// Debian's etcd-server and zookeeper (with default-jre-headless).
import { buildProgram, runPlan } from './src/cli.mjs';

for (const args of runPlan(process.argv.slice(2))) await buildProgram().parseAsync(args, { from: 'user' });
