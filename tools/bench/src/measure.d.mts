export interface CpuUse {
  wallS: number;
  serverS: number;
  perPid: Record<string, number>;
  leaderS?: number;
  loadgenS: number;
  otherS: number;
  machineS: number;
}
export interface ComponentTotal {
  component: string;
  processes: number;
  total: number;
}
export declare function procCpuSeconds(pid: number): number | undefined;
export declare function procRssBytes(pid: number): number | undefined;
export declare function byComponent(perPid: Record<string, number>, componentOf: Map<number, string>): ComponentTotal[];
export declare function quantile(xs: number[], q: number): number;
export declare function median(xs: number[]): number;
export declare class CpuWindow {
  constructor(pidsFn: () => number[], leaderPidFn?: () => number | undefined);
  begin(): void;
  end(): CpuUse;
}
