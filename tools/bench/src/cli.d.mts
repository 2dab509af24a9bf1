import type { Command } from 'commander';

/** The whole command line, every suite declared; nothing runs until parseAsync(). */
export declare function buildProgram(): Command;
