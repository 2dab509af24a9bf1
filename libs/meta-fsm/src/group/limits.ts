/**
 * Bounds of one meta-group member (CONTRIBUTING.md, "Limits"): per instance, not
 * replicated, unlike META_LIMITS.
 */

/** Linearizable reads waiting for the next ReadIndex round on this member; beyond it, TOO_MANY_REQUESTS. */
export const META_READS_WAITING_MAX = 10_000;
/** Routing long polls held open at once on this member; beyond it, TOO_MANY_REQUESTS. */
export const META_ROUTING_WAITERS_MAX = 10_000;
