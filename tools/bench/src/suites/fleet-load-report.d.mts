export declare const STEADY_SHARE: number;
export interface ComponentRow {
  component: string;
  processes: number;
  cores: number;
  rssMiB: number;
  rssMaxMiB: number;
}
export interface StormSample {
  t: number;
  acked: number;
  leaderCpuS: number;
}
export interface StormBin {
  t: number;
  hbPerS: number;
  reopenPerS: number;
  leaderCores: number;
}
export declare function componentTable(
  cpuPerPid: Record<string, number>,
  rssPerPid: Record<string, number | undefined>,
  componentOf: Map<number, string>,
  wallS: number,
): ComponentRow[];
export declare function stormFigures(
  samples: StormSample[],
  opts: { sessions: number; offeredPerS: number; binMs?: number },
): { bins: StormBin[]; peakHbPerS: number; peakReopenPerS: number; peakLeaderCores: number; steadyMs: number | undefined };
