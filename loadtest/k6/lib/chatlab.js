// What every chatlab k6 script shares: its settings from the environment,
// the scenario (closed or open model), thresholds per operation, the
// override headers and think time. It mirrors chatlab-load's flags:
//
//   BASE_URL      the server (default http://127.0.0.1:8080)
//   MODEL         closed (default: VUS users looping) or open (RATE
//                 requests per second whatever the latency: k6's
//                 constant-arrival-rate, chatlab-load --rate)
//   VUS           closed model: virtual users (open model: most VUs k6
//                 may start to keep up the rate)
//   RATE          open model: requests per second
//   DURATION      how long (default 30s)
//   THINK_TIME    seconds a VU waits after each request (default 0; the
//                 seeds' "think time 1 s" is THINK_TIME=1)
//   STRATEGY      X-Chatlab-Insert-Strategy on writes: per_row, batch,
//                 unnest, single or pipeline (empty: the server's own)
//   PUBLISH_MODE  X-Chatlab-Publish-Mode on writes: off, after_commit,
//                 in_tx_await, in_tx_enqueue or outbox (empty: the server's)
//   P95_MS, P99_MS, MAX_ERROR_RATE  the thresholds (default 500, 1000, 0.01)
//
// The server honours the two headers only with CHATLAB_ALLOW_OVERRIDES=true.
import { sleep } from 'k6';

export const env = {
  baseUrl: __ENV.BASE_URL || 'http://127.0.0.1:8080',
  model: (__ENV.MODEL || 'closed').toLowerCase(),
  vus: positive('VUS', 60),
  rate: positive('RATE', 200),
  duration: __ENV.DURATION || '30s',
  thinkTime: nonNegative('THINK_TIME', 0),
  strategy: __ENV.STRATEGY || '',
  publishMode: __ENV.PUBLISH_MODE || '',
  p95: positive('P95_MS', 500),
  p99: positive('P99_MS', 1000),
  maxErrorRate: nonNegative('MAX_ERROR_RATE', 0.01),
};

const STRATEGIES = ['per_row', 'batch', 'unnest', 'single', 'pipeline'];
const PUBLISH_MODES = ['off', 'after_commit', 'in_tx_await', 'in_tx_enqueue', 'outbox'];
if (env.strategy && !STRATEGIES.includes(env.strategy)) {
  throw new Error(`STRATEGY=${env.strategy}: expected one of ${STRATEGIES.join(', ')}`);
}
if (env.publishMode && !PUBLISH_MODES.includes(env.publishMode)) {
  throw new Error(`PUBLISH_MODE=${env.publishMode}: expected one of ${PUBLISH_MODES.join(', ')}`);
}
if (env.model !== 'closed' && env.model !== 'open') {
  throw new Error(`MODEL=${env.model}: expected closed or open`);
}

function positive(name, fallback) {
  const v = __ENV[name] === undefined || __ENV[name] === '' ? fallback : Number(__ENV[name]);
  if (!(v > 0)) throw new Error(`${name}=${__ENV[name]}: expected a positive number`);
  return v;
}

function nonNegative(name, fallback) {
  const v = __ENV[name] === undefined || __ENV[name] === '' ? fallback : Number(__ENV[name]);
  if (!(v >= 0)) throw new Error(`${name}=${__ENV[name]}: expected a number >= 0`);
  return v;
}

// The scenario by MODEL: constant VUs (closed), or a constant arrival rate
// (open: k6 starts a request every 1/RATE s, and counts the ones it could
// not start as dropped_iterations).
export function scenario(extra = {}) {
  if (env.model === 'open') {
    return Object.assign(
      {
        executor: 'constant-arrival-rate',
        rate: env.rate,
        timeUnit: '1s',
        duration: env.duration,
        preAllocatedVUs: Math.min(env.vus, Math.ceil(env.rate)),
        maxVUs: Math.max(env.vus, Math.ceil(env.rate)),
      },
      extra,
    );
  }
  return Object.assign({ executor: 'constant-vus', vus: env.vus, duration: env.duration }, extra);
}

// Errors overall, and p95/p99 of each tagged operation: a run fails (k6
// exits non-zero) when one is crossed.
export function thresholds(ops) {
  const t = {
    http_req_failed: [`rate<${env.maxErrorRate}`],
    checks: [`rate>${1 - env.maxErrorRate}`],
  };
  for (const op of ops) {
    t[`http_req_duration{op:${op}}`] = [`p(95)<${env.p95}`, `p(99)<${env.p99}`];
  }
  return t;
}

// Request parameters of a write: JSON, the overrides, and the tags a
// summary splits by.
export function writeParams(op) {
  const headers = { 'Content-Type': 'application/json' };
  if (env.strategy) headers['X-Chatlab-Insert-Strategy'] = env.strategy;
  if (env.publishMode) headers['X-Chatlab-Publish-Mode'] = env.publishMode;
  return { headers, tags: tags(op) };
}

// Request parameters of a read.
export function readParams(op) {
  return { tags: tags(op) };
}

function tags(op) {
  return {
    op,
    strategy: env.strategy || 'server-default',
    publish_mode: env.publishMode || 'server-default',
  };
}

// The think time after a request, jittered ±10% so VUs do not march in step.
export function think() {
  if (env.thinkTime > 0) sleep(env.thinkTime * (0.9 + Math.random() * 0.2));
}

// `count` members from the seeded users: a random window, creator first.
export function pickMembers(ids, count) {
  const n = Math.min(count, ids.length);
  const start = Math.floor(Math.random() * (ids.length - n + 1));
  return ids.slice(start, start + n);
}
