// Runs every k6 script of this folder under node, against recording stubs
// of k6's modules (check/), and checks what it would send: its scenario and
// thresholds, the operation tags, the strategy and publish-mode headers on
// writes, think time, seeding through the operator listener, a bearer
// token for the right user on every chat request (verified here as chatlab
// verifies it), and that bad settings are refused. No k6 and no server
// needed: `make k6-check`.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { register } from 'node:module';

register('./check/hooks.mjs', import.meta.url);

let caseNo = 0;
const SECRET = 'k6-check-secret-0123456789abcdef-0123456789';
const OPS_URL = 'http://127.0.0.1:19464';
// What every case runs with unless it says otherwise.
const BASE_ENV = { CHATLAB_JWT_SECRET: SECRET, OPS_URL };

// The user an `Authorization` header speaks for, checked as chatlab checks
// it: HS256 only, the signature with SECRET, issuer chatlab, not expired
// (and good for the length of a run).
function subject(headers) {
  const auth = headers?.Authorization;
  assert.ok(auth, 'an Authorization header');
  const m = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(auth);
  assert.ok(m, `a bearer JWT: ${auth}`);
  const [, head, claims, sig] = m;
  assert.deepEqual(JSON.parse(Buffer.from(head, 'base64url')), { alg: 'HS256', typ: 'JWT' });
  assert.equal(createHmac('sha256', SECRET).update(`${head}.${claims}`).digest('base64url'), sig, 'the signature');
  const c = JSON.parse(Buffer.from(claims, 'base64url'));
  const now = Math.floor(Date.now() / 1000);
  assert.equal(c.iss, 'chatlab');
  assert.ok(c.iat <= now && c.exp >= now + 23 * 3600, `iat ${c.iat}, exp ${c.exp}`);
  return c.sub;
}

// Users were seeded once, in setup, through the operator listener.
function assertSeededThroughOps(setup) {
  const bulk = setup.filter((r) => r.url.endsWith('/v1/users/bulk'));
  assert.equal(bulk.length, 1);
  assert.equal(bulk[0].url, `${OPS_URL}/v1/users/bulk`);
  assert.equal(bulk[0].params.headers?.Authorization, undefined);
}

// Imports `script` with `env` (over BASE_ENV) as __ENV; runs setup and
// `iterations` of its default function; answers the module, setup's data
// and requests, and what the iterations sent.
async function run(script, env, iterations = 1) {
  caseNo += 1;
  globalThis.__ENV = { ...BASE_ENV, ...env };
  globalThis.__VU = 1;
  globalThis.__ITER = 0;
  globalThis.__k6 = { requests: [], checks: [], sleeps: [] };
  const mod = await import(`./${script}?case=${caseNo}`);
  const data = mod.setup ? mod.setup() : undefined;
  const setupRequests = globalThis.__k6.requests.length;
  for (let i = 0; i < iterations; i++) {
    globalThis.__ITER = i;
    mod.default(data);
  }
  const sent = globalThis.__k6.requests.slice(setupRequests);
  const setup = globalThis.__k6.requests.slice(0, setupRequests);
  return { mod, data, setup, sent, ...globalThis.__k6 };
}

function assertThresholds(options, ops) {
  assert.ok(options.thresholds.http_req_failed, 'an error-rate threshold');
  for (const op of ops) {
    const t = options.thresholds[`http_req_duration{op:${op}}`];
    assert.ok(t, `latency thresholds for ${op}`);
    assert.ok(t.some((x) => x.startsWith('p(95)<')) && t.some((x) => x.startsWith('p(99)<')), `${op}: p95 and p99`);
  }
}

async function expectRefused(script, env, pattern) {
  caseNo += 1;
  globalThis.__ENV = { ...BASE_ENV, ...env };
  await assert.rejects(import(`./${script}?case=${caseNo}`), pattern);
}

const cases = {
  async 'live.js listens over /v1/ws as members and writes to their chats'() {
    const env = { LISTENERS: '20', CHAT_MEMBERS: '5', RATE: '10', DURATION: '10s', DELIVERY_P99_MS: '250' };
    const { mod, data, setup } = await run('live.js', env, 0);
    assertSeededThroughOps(setup);
    const listeners = mod.options.scenarios.listeners;
    assert.equal(listeners.vus, 20);
    assert.equal(mod.options.scenarios.writers.executor, 'constant-arrival-rate');
    assert.equal(mod.options.scenarios.writers.rate, 10);
    assert.deepEqual(mod.options.thresholds.live_delivery_ms, ['p(99)<250']);
    assert.equal(data.chats.length, 4);
    globalThis.__VU = 7;
    mod.listen(data);
    const [{ url, params, socket }] = globalThis.__k6.sockets;
    assert.equal(url, 'ws://127.0.0.1:8080/v1/ws');
    // Listener 7 is seeded user 6, a member of chat 1.
    assert.equal(subject(params.headers), data.users[6].id);
    assert.ok(data.chats[1].members.includes(6));
    assert.deepEqual(socket.timeouts, [16000], 'open for the run and a margin');
    const delays = globalThis.__k6.metrics.live_delivery_ms;
    assert.equal(delays.length, 1, 'one message.sent timed, the heartbeat not');
    assert.ok(delays[0] >= 5 && delays[0] < 1000, `delay ${delays[0]}`);
    assert.ok(globalThis.__k6.checks.some((c) => c.name === 'live socket opened' && c.ok));
    const before = globalThis.__k6.requests.length;
    mod.write(data);
    const [post] = globalThis.__k6.requests.slice(before);
    const chat = /\/v1\/chats\/([^/]+)\/messages$/.exec(post.url)[1];
    const members = data.chats.find((c) => c.id === chat).members.map((i) => data.users[i].id);
    assert.ok(members.includes(subject(post.params.headers)), 'the writer is a member');
  },
  async 'live.js refuses fewer listeners than a chat has members'() {
    await expectRefused('live.js', { LISTENERS: '3', CHAT_MEMBERS: '5' }, /LISTENERS=3/);
  },
  async 'create_chat.js sends the strategy, the publish mode and thinks'() {
    const env = { STRATEGY: 'pipeline', PUBLISH_MODE: 'outbox', THINK_TIME: '0.5', MEMBERS: '50', P95_MS: '150' };
    const { mod, data, setup, sent, sleeps, checks } = await run('create_chat.js', env, 3);
    assertSeededThroughOps(setup);
    const seeded = new Set(data.users.map((u) => u.id));
    assert.equal(mod.options.scenarios.create_chat.executor, 'constant-vus');
    assertThresholds(mod.options, ['create']);
    assert.deepEqual(mod.options.thresholds['http_req_duration{op:create}'], ['p(95)<150', 'p(99)<1000']);
    assert.equal(sent.length, 3);
    for (const r of sent) {
      assert.equal(r.method, 'POST');
      assert.match(r.url, /\/v1\/chats$/);
      assert.equal(r.params.headers['X-Chatlab-Insert-Strategy'], 'pipeline');
      assert.equal(r.params.headers['X-Chatlab-Publish-Mode'], 'outbox');
      assert.equal(r.params.tags.op, 'create');
      assert.equal(r.params.tags.strategy, 'pipeline');
      assert.equal(r.url, 'http://127.0.0.1:8080/v1/chats');
      const body = JSON.parse(r.body);
      assert.deepEqual(Object.keys(body).sort(), ['member_ids', 'name']);
      assert.equal(body.member_ids.length, 49);
      // The creator is the token's subject: a seeded user, not listed.
      const creator = subject(r.params.headers);
      assert.ok(seeded.has(creator));
      assert.ok(!body.member_ids.includes(creator));
    }
    assert.equal(sleeps.length, 3);
    assert.ok(sleeps.every((s) => s >= 0.45 && s <= 0.55), `jittered think time: ${sleeps}`);
    assert.ok(checks.every((c) => c.ok));
  },
  async 'create_chat.js without overrides sends no override header and does not sleep'() {
    const { sent, sleeps } = await run('create_chat.js', {}, 2);
    for (const r of sent) {
      assert.equal(r.params.headers['X-Chatlab-Insert-Strategy'], undefined);
      assert.equal(r.params.headers['X-Chatlab-Publish-Mode'], undefined);
      assert.equal(r.params.tags.strategy, 'server-default');
    }
    assert.equal(sleeps.length, 0);
  },
  async 'MODEL=open is a constant arrival rate'() {
    const { mod } = await run('create_chat.js', { MODEL: 'open', RATE: '500', VUS: '100' }, 0);
    const s = mod.options.scenarios.create_chat;
    assert.equal(s.executor, 'constant-arrival-rate');
    assert.equal(s.rate, 500);
    assert.equal(s.timeUnit, '1s');
    assert.ok(s.maxVUs >= 500 && s.preAllocatedVUs >= 1);
  },
  async 'messages.js mix sends every operation, overrides on writes only'() {
    const { mod, data, sent } = await run('messages.js', { SCENARIO: 'mix', STRATEGY: 'single', WEIGHTS: '1:1:1' }, 300);
    assertThresholds(mod.options, ['create', 'send', 'read']);
    const ops = new Set(sent.map((r) => r.params.tags.op));
    assert.deepEqual([...ops].sort(), ['create', 'read', 'send']);
    for (const r of sent) {
      const write = r.method === 'POST';
      assert.equal(write, r.params.tags.op !== 'read');
      assert.equal(r.params.headers?.['X-Chatlab-Insert-Strategy'], write ? 'single' : undefined);
    }
  },
  async 'messages.js sends and reads as a member of the chat, creates as the creator'() {
    const { data, sent } = await run('messages.js', { SCENARIO: 'mix', WEIGHTS: '1:1:1' }, 300);
    const members = new Map(data.chats.map((c) => [c.id, c.members.map((i) => data.users[i].id)]));
    const senders = new Set();
    for (const r of sent) {
      const who = subject(r.params.headers);
      const body = r.body === undefined ? undefined : JSON.parse(r.body);
      if (r.params.tags.op === 'create') {
        assert.ok(!body.member_ids.includes(who), 'the creator is not listed');
        assert.equal(body.creator_id, undefined);
        continue;
      }
      const chat = /\/v1\/chats\/([^/]+)\/messages/.exec(r.url)[1];
      assert.ok(members.get(chat).includes(who), `${r.params.tags.op} as a member of ${chat}`);
      if (r.params.tags.op === 'send') {
        assert.deepEqual(body, { body: 'hello from k6' });
        senders.add(who);
      }
    }
    assert.ok(senders.size > 3, 'any member sends, not only creators');
  },
  async 'messages.js seeds users through OPS_URL and chats as their creators'() {
    const { data, setup } = await run('messages.js', { SCENARIO: 'read', STRATEGY: 'batch' }, 0);
    assertSeededThroughOps(setup);
    const chats = setup.filter((r) => r.url.endsWith('/v1/chats'));
    assert.equal(chats.length, data.chats.length);
    chats.forEach((r, i) => {
      const members = data.chats[i].members.map((m) => data.users[m].id);
      assert.equal(subject(r.params.headers), members[0]);
      assert.deepEqual(JSON.parse(r.body).member_ids, members.slice(1));
      assert.equal(r.params.headers['X-Chatlab-Insert-Strategy'], undefined, 'setup sends no override');
      assert.equal(r.params.tags.op, 'setup');
    });
  },
  async 'messages.js import sends a job of ROWS messages as the chat\'s creator'() {
    const { mod, data, sent } = await run('messages.js', { SCENARIO: 'import', ROWS: '250', STRATEGY: 'unnest' }, 1);
    assertThresholds(mod.options, ['import']);
    assert.equal(sent.length, 1);
    assert.match(sent[0].url, /\/messages\/import$/);
    const messages = JSON.parse(sent[0].body).messages;
    assert.equal(messages.length, 250);
    assert.equal(sent[0].params.headers['X-Chatlab-Insert-Strategy'], 'unnest');
    const chat = data.chats[0];
    const members = chat.members.map((m) => data.users[m].id);
    assert.ok(sent[0].url.includes(`/v1/chats/${chat.id}/`));
    assert.equal(subject(sent[0].params.headers), members[0], 'the owner imports');
    assert.ok(messages.every((m) => members.includes(m.sender_id)), 'every sender a member');
  },
  async 'ramp.js ramps 85 to 400 VUs and tags its requests'() {
    const { mod, sent } = await run('ramp.js', { STRATEGY: 'batch' }, 1);
    const s = mod.options.scenarios.ramp;
    assert.equal(s.executor, 'ramping-vus');
    assert.deepEqual(s.stages.map((x) => x.target), [85, 200, 200, 300, 300, 400, 400]);
    assertThresholds(mod.options, ['create']);
    assert.equal(sent[0].params.tags.op, 'create');
    assert.equal(sent[0].params.headers['X-Chatlab-Insert-Strategy'], 'batch');
    assert.ok(!JSON.parse(sent[0].body).member_ids.includes(subject(sent[0].params.headers)));
  },
  async 'BASE_URL, OPS_URL and CHATLAB_JWT_ISSUER are honoured'() {
    const env = { BASE_URL: 'http://10.0.0.1:1', OPS_URL: 'http://10.0.0.1:2', CHATLAB_JWT_ISSUER: 'lab' };
    const { setup, sent } = await run('ramp.js', env, 1);
    assert.equal(setup[0].url, 'http://10.0.0.1:2/v1/users/bulk');
    assert.equal(sent[0].url, 'http://10.0.0.1:1/v1/chats');
    const claims = JSON.parse(Buffer.from(sent[0].params.headers.Authorization.split('.')[1], 'base64url'));
    assert.equal(claims.iss, 'lab');
  },
  async 'bad settings are refused'() {
    await expectRefused('create_chat.js', { STRATEGY: 'bulk' }, /STRATEGY=bulk/);
    await expectRefused('create_chat.js', { PUBLISH_MODE: 'later' }, /PUBLISH_MODE=later/);
    await expectRefused('create_chat.js', { MODEL: 'half-open' }, /MODEL=half-open/);
    await expectRefused('create_chat.js', { VUS: '0' }, /VUS=0/);
    await expectRefused('messages.js', { SCENARIO: 'delete' }, /SCENARIO=delete/);
    await expectRefused('messages.js', { WEIGHTS: '1:2' }, /WEIGHTS=1:2/);
    await expectRefused('create_chat.js', { CHATLAB_JWT_SECRET: '' }, /CHATLAB_JWT_SECRET is not set/);
    await expectRefused('ramp.js', { CHATLAB_JWT_SECRET: 'short' }, /CHATLAB_JWT_SECRET is 5 bytes/);
  },
};

let failed = 0;
for (const [name, f] of Object.entries(cases)) {
  try {
    await f();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}\n     ${e.message}`);
  }
}
console.log(failed ? `k6 scripts: ${failed} of ${Object.keys(cases).length} checks failed` : 'k6 scripts ok');
process.exit(failed ? 1 : 0);
