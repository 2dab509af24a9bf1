#!/usr/bin/env node
// Fencer's benchmarks, one entry: `node tools/bench/run.mjs <suite> [options]`
// (`npm run bench -- [options]` builds first and runs the default suite,
// page: every suite that writes docs/benchmarks.md, one after another).
// `--help` lists the suites; `help <suite>` its options. Suites:
// efficiency (Fencer through its router beside ZooKeeper and etcd, CPU per
// operation; draws docs/charts), fleet-load (eight cells under heartbeats
// and locks, and a reconnect storm), scaling (throughput by cells),
// cell (Fencer against etcd and ZooKeeper), fleet (router overhead and
// heartbeats through the proxies), wal, lock-fsm, duties (micro-benchmarks
// of one library each), snapshots (object storage and restore), moves
// (tenant moves between cells), security (mutual TLS against plaintext) and
// profile (summarises a V8 CPU profile).
//
// Needs the tree built (`npx nx run-many -t build`) and, for the peers,
// Debian's etcd-server and zookeeper (with default-jre-headless).
import { buildProgram } from './src/cli.mjs';

await buildProgram().parseAsync();
