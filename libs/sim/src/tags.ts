/**
 * Event kinds, packed into the low byte of an event's tag (node numbers in
 * the higher bytes) so the trace hash records what ran, where and when.
 */
export const Tag = {
  message: 1,
  tick: 2,
  disk: 3,
  client: 4,
  nemesis: 5,
  restart: 6,
  resume: 7,
  check: 8,
  phase: 9,
} as const;
