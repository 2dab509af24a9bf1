/** The process logger is @fencer/service's; the cell node's parts (and tools/chaos, through dist/logger.js) name it from here. */
export { createLogger, type Logger } from '@fencer/service';
