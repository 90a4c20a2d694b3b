// A stand-in for k6's `k6` module: records checks and sleeps.
export function check(res, checks) {
  for (const [name, f] of Object.entries(checks)) {
    globalThis.__k6.checks.push({ name, ok: Boolean(f(res)) });
  }
  return true;
}

export function sleep(seconds) {
  globalThis.__k6.sleeps.push(seconds);
}
