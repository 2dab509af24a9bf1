#!/usr/bin/env node
import { runCli } from './cli.js';
import { processIo } from './io.js';

const code = await runCli(process.argv.slice(2), processIo());
// process.exit() drops what stdout and stderr still queue for a slow reader (a pipe whose
// buffer is full, as in `fencer list | less`): exit once both have handed everything over.
// A reader that went away (EPIPE) ends the wait as well.
let open = 2;
const flushed = (): void => {
  if (--open === 0) process.exit(code);
};
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', () => {});
  stream.write('', flushed);
}
