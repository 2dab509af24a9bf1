#!/usr/bin/env node
// The `fencer` binary: wires the process (argv, stdio, env, signals) to runCli.
import { runCli } from './cli.js';
import { processIo } from './io.js';

const code = await runCli(process.argv.slice(2), processIo());
process.exit(code);
