/** Scenario keys named by a list (a prefix names a family; 'all' every one); throws when none matches. */
export declare function selectScenarios(spec: string[]): string[];
