/** Virtual time runs in microseconds: these turn milliseconds and seconds into it. */
export const US_PER_MS = 1_000;
export const US_PER_SECOND = 1_000_000;
