export declare const PAGE_SUITES: string[];
export declare function suiteArgs(suite: string, opts: { quick?: boolean; write?: boolean }): string[];
