/**
 * The cell node is an app: nothing imports it (apps import only libs). What
 * other apps share with it lives in libs, its peer transport and the lane in
 * @fencer/peer-transport. It runs from main.ts; the chaos harness starts its
 * compiled build.js the same way.
 */
export {};
