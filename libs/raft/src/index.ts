export * from './types.js';
export * from './api.js';
