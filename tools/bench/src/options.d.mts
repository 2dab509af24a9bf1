import type { Command, Option } from 'commander';

export declare function positive(value: string): number;
export declare function count(value: string): number;
export declare function list(value: string): string[];
export declare function numeric(
  cmd: Command,
  flags: string,
  description: string,
  normal: number,
  quick?: number,
  parse?: (value: string) => number,
): Command;
export declare function common(cmd: Command, opts?: { quick?: boolean }): Command;
export declare function baseline(cmd: Command, what: string): Command;
/** The parsed options, with --quick's presets for every option not given. */
export declare function resolve(cmd: Command): Record<string, unknown>;
export declare function listOption(flags: string, description: string, fallback: string[]): Option;
