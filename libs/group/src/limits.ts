/**
 * The fixed bounds of a group member. Per-member sizes that operators tune
 * (reads waiting for a ReadIndex round) come from its configuration.
 */

/**
 * Largest delay a timer may be given: Node turns any setTimeout delay above
 * 2^31 - 1 ms into 1 ms, so a longer wait is chained in steps of this.
 */
export const TIMER_DELAY_MS_MAX = 2 ** 31 - 1;
