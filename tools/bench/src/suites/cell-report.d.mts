import type { SummaryRow } from '../report.mjs';

/** One measurement of one system in one scenario, as the cell suite records it. */
export interface CellResult {
  scenario: string;
  system: string;
  round?: number;
  skipped?: string;
  error?: string;
  ops?: number;
  rate?: number;
  p50?: number;
  p99?: number;
  unavailableMs?: number;
  failed?: number;
  note?: string;
  cpu?: { wallS: number; serverS: number; loadgenS: number; otherS: number };
}
export interface CellMeta {
  date: string;
  command: string;
  cpu: string;
  memGiB: string;
  kernel: string;
  node: string;
  loadStart: string;
  loadEnd: string;
  totalS: number;
  opts: Record<string, unknown>;
  scenarioKeys: string[];
  systems: { key: string; label: string; version?: string; settings?: string }[];
}
export declare function find(results: CellResult[], scenario: string, system: string): CellResult | undefined;
export declare function renderMarkdown(meta: CellMeta, systems: { key: string; label: string }[], results: CellResult[]): string;
export declare function summaryRows(meta: CellMeta, systems: { key: string; label: string }[], results: CellResult[]): SummaryRow[];
