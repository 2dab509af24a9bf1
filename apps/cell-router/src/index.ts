/** The cell router's command line; the router itself is @fencer/routing's buildRouter, and main.ts runs it. */
export { parseRouterConfig, type RouterConfig } from './config.js';
