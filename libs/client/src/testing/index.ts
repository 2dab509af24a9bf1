export { ManualScheduler } from './manual-scheduler.js';
export { FakeLockService, type FakeCall, type FakeEvents, type FakeLockServiceOptions, type InjectedFault } from './fake-lock-service.js';
export { FakeLocks, type FakeLock } from './fake-locks.js';
