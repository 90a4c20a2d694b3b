// What every chatlab k6 script shares: its settings from the environment,
// the scenario (closed or open model), thresholds per operation, the
// override headers, think time, seeding and bearer tokens. It mirrors
// chatlab-load's flags:
//
//   BASE_URL      the server's public listener (default http://127.0.0.1:8080)
//   OPS_URL       its operator listener, OPS_ADDR (default
//                 http://127.0.0.1:9464): users are seeded there
//                 (POST /v1/users/bulk answers nowhere else)
//   CHATLAB_JWT_SECRET  the server's CHATLAB_JWT_SECRET (required): every
//                 chat request carries an HS256 token signed with it for
//                 the acting user, signed once per seeded user in setup
//   CHATLAB_JWT_ISSUER  the server's issuer (default chatlab)
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
//                 batch_prepared, unnest, single or pipeline (empty: the
//                 server's own)
//   PUBLISH_MODE  X-Chatlab-Publish-Mode on writes: off, after_commit,
//                 in_tx_await, in_tx_enqueue or outbox (empty: the server's)
//   P95_MS, P99_MS, MAX_ERROR_RATE  the thresholds (default 500, 1000, 0.01)
//
// The server honours the two headers only with CHATLAB_ALLOW_OVERRIDES=true.
import http from 'k6/http';
import { check, sleep } from 'k6';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';

// Tokens live longer than any run (seconds).
const TOKEN_TTL = 24 * 60 * 60;
// HS256 wants at least 32 bytes of secret (chatlab refuses less).
const MIN_SECRET_BYTES = 32;

export const env = {
  baseUrl: __ENV.BASE_URL || 'http://127.0.0.1:8080',
  opsUrl: __ENV.OPS_URL || 'http://127.0.0.1:9464',
  jwtSecret: __ENV.CHATLAB_JWT_SECRET || '',
  jwtIssuer: __ENV.CHATLAB_JWT_ISSUER || 'chatlab',
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

const STRATEGIES = ['per_row', 'batch', 'batch_prepared', 'unnest', 'single', 'pipeline'];
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
if (!env.jwtSecret) {
  throw new Error("CHATLAB_JWT_SECRET is not set: give the server's secret, so tokens can be signed for the seeded users");
}
if (utf8Length(env.jwtSecret) < MIN_SECRET_BYTES) {
  throw new Error(`CHATLAB_JWT_SECRET is ${utf8Length(env.jwtSecret)} bytes: HS256 needs at least ${MIN_SECRET_BYTES}`);
}

// Bytes of `s` in UTF-8 (the HMAC key is the secret's bytes).
function utf8Length(s) {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
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
  if (env.model === 'open') return arrivals(extra);
  return Object.assign({ executor: 'constant-vus', vus: env.vus, duration: env.duration }, extra);
}

// RATE requests a second for DURATION, whatever MODEL says.
export function arrivals(extra = {}) {
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

// An HS256 JWT for user `id`, as chatlab verifies it: subject, issuer,
// issued now, expiring after TOKEN_TTL.
export function token(id) {
  const now = Math.floor(Date.now() / 1000);
  const header = encoding.b64encode(JSON.stringify({ alg: 'HS256', typ: 'JWT' }), 'rawurl');
  const claims = encoding.b64encode(
    JSON.stringify({ sub: id, iss: env.jwtIssuer, iat: now, exp: now + TOKEN_TTL }),
    'rawurl',
  );
  const signed = `${header}.${claims}`;
  return `${signed}.${crypto.hmac('sha256', env.jwtSecret, signed, 'base64rawurl')}`;
}

// `count` users seeded through the operator listener, each with its token
// signed now (before the measured phase): [{ id, token }].
export function seedUsers(count) {
  const res = http.post(`${env.opsUrl}/v1/users/bulk`, JSON.stringify({ count }), {
    headers: { 'Content-Type': 'application/json' },
    tags: { op: 'setup' },
  });
  check(res, { 'users seeded': (r) => r.status === 201 });
  if (res.status !== 201) {
    throw new Error(`POST ${env.opsUrl}/v1/users/bulk answered ${res.status}: is OPS_URL the server's OPS_ADDR?`);
  }
  return res.json('ids').map((id) => ({ id, token: token(id) }));
}

function authorization(user) {
  return { Authorization: `Bearer ${user.token}` };
}

// Request parameters of a write as `user` ({ id, token }): JSON, the
// bearer token, the overrides, and the tags a summary splits by.
export function writeParams(op, user) {
  const headers = Object.assign({ 'Content-Type': 'application/json' }, authorization(user));
  if (env.strategy) headers['X-Chatlab-Insert-Strategy'] = env.strategy;
  if (env.publishMode) headers['X-Chatlab-Publish-Mode'] = env.publishMode;
  return { headers, tags: tags(op) };
}

// Request parameters of a read as `user`.
export function readParams(op, user) {
  return { headers: authorization(user), tags: tags(op) };
}

// Request parameters of setup's own writes as `user`: no override header.
export function setupParams(user) {
  return {
    headers: Object.assign({ 'Content-Type': 'application/json' }, authorization(user)),
    tags: { op: 'setup' },
  };
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
export function pickMembers(users, count) {
  const n = Math.min(count, users.length);
  const start = Math.floor(Math.random() * (users.length - n + 1));
  return users.slice(start, start + n);
}

// createChat as the first of `members` (the creator, whom the server
// takes from the token and always makes a member), the others listed:
// http.post's arguments. `params` default to a write's (tag op:create).
export function createChatRequest(name, members, params) {
  const [creator, ...others] = members;
  return [
    `${env.baseUrl}/v1/chats`,
    JSON.stringify({ name, member_ids: others.map((u) => u.id) }),
    params || writeParams('create', creator),
  ];
}
