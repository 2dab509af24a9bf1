export declare const DOC: string;
export declare const SUMMARY_ORDER: string[];
export interface SummaryRow {
  id: string;
  figure: string;
  value: string;
  command: string;
}
export declare function commandLine(argv?: string[]): string;
export declare function replaceSection(text: string, name: string, body: string, opts?: { keepNotes?: boolean }): string;
export declare function summaryRow(row: SummaryRow): string;
export declare function replaceSummaryRows(text: string, rows: SummaryRow[]): string;
export declare function writeDocs(opts: {
  name: string;
  body: string;
  rows?: SummaryRow[];
  keepNotes?: boolean;
  write?: boolean;
  doc?: string;
}): void;
export declare function textTable(head: unknown[], rows: unknown[][]): string;
export declare function markdownTable(head: unknown[], rows: unknown[][], align?: ('l' | 'r')[]): string;
