export declare const SATURATED_SHARE: number;
export declare const GAIN_MIN: number;
export interface ScalingRow {
  cells: number;
  processes?: number;
  ops?: number;
  rate?: number;
  p50?: number;
  p99?: number;
  cpu?: { wallS: number; serverS: number; loadgenS: number; machineS: number };
  error?: string;
}
export declare function whereCoresRunOut(
  rows: ScalingRow[],
  cores: number,
): { saturatedAt: number | undefined; flatAt: number | undefined };
export declare function renderMarkdown(meta: Record<string, unknown>, rows: ScalingRow[]): string;
