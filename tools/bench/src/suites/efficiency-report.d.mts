import type { ComponentTotal, CpuUse } from '../measure.mjs';
import type { SummaryRow } from '../report.mjs';

export interface EfficiencySystem {
  key: string;
  label: string;
  version?: string;
  settings?: string;
}
export interface ComponentPerOp {
  component: string;
  processes: number;
  cpuMsPerOp: number | undefined;
}
export interface EfficiencyResult {
  scenario: string;
  system: string;
  round: number;
  ops?: number;
  rate?: number;
  offeredPerS?: number;
  p50?: number;
  p99?: number;
  failed?: number;
  cpu?: Partial<CpuUse>;
  cpuMsPerOp?: number;
  components?: ComponentPerOp[];
  note?: string;
  error?: string;
  skipped?: string;
}
export interface EfficiencyMeta {
  date: string;
  cpu: string;
  node: string;
  loadStart: string;
  loadEnd?: string;
  totalS?: number;
  provisional?: boolean;
  command: string;
  clients: number[];
  upkeepIntervalMs: number;
  opts: { seconds: number; warmup: number; systemWarmup: number; rounds: number };
  systems: EfficiencySystem[];
}
export declare function cpuMsPerOp(cpu: Partial<CpuUse> | undefined, ops: number): number | undefined;
export declare function componentsPerOp(components: ComponentTotal[] | undefined, ops: number): ComponentPerOp[];
export declare function pick(results: EfficiencyResult[], scenario: string, system: string): EfficiencyResult | undefined;
export declare function shortName(system: EfficiencySystem): string;
export declare function targets(meta: EfficiencyMeta, results: EfficiencyResult[]): string[][];
export declare function renderMarkdown(meta: EfficiencyMeta, results: EfficiencyResult[]): string;
export declare function summaryRows(meta: EfficiencyMeta, results: EfficiencyResult[]): SummaryRow[];
export declare function charts(meta: EfficiencyMeta, results: EfficiencyResult[]): { file: string; svg: string; alt: string }[];
export declare function chartsBlock(meta: EfficiencyMeta, results: EfficiencyResult[], list: { file: string; alt: string }[]): string;
