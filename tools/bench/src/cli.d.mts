import type { Command } from 'commander';

/** The whole command line, every suite declared; nothing runs until parseAsync(). */
export declare function buildProgram(): Command;

/** What `run.mjs ...args` runs, one argument list per suite in order (no suite named: cell, then failover). */
export declare function runPlan(args: string[]): string[][];
