/**
 * The cell node is an app: no app or lib imports it (apps import only libs;
 * what other apps share with it lives in libs, its peer transport and the
 * lane in @fencer/peer-transport). It runs from main.ts. This entry is the
 * node's composition for tools that run it with test hooks main.ts never
 * sets (tools/chaos plants cell bugs this way).
 */
export { buildCellNode, type CellNodeApp, type CellNodeDeps } from './build.js';
export { parseConfig, type CellNodeConfig } from './config.js';
export { NodeMetrics } from './metrics.js';
