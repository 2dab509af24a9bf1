export interface ChartSeries {
  name: string;
  values: (number | undefined)[];
}
export interface ChartSpec {
  title: string;
  yLabel: string;
  xLabel?: string;
  categories: string[];
  series: ChartSeries[];
}
export declare const SYSTEM_COLOURS: Record<string, string>;
export declare function escapeXml(s: unknown): string;
export declare function niceTicks(max: number, count?: number): number[];
export declare function tickLabel(v: number): string;
export declare function lineChart(spec: ChartSpec): string;
export declare function barChart(spec: ChartSpec): string;
export declare function writeCharts(dir: string, charts: { file: string; svg: string }[]): string[];
