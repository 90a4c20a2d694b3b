// Runs every k6 script of this folder under node, against recording stubs
// of k6's modules (check/), and checks what it would send: its scenario and
// thresholds, the operation tags, the strategy and publish-mode headers on
// writes, think time, and that bad settings are refused. No k6 and no
// server needed: `make k6-check`.
import assert from 'node:assert/strict';
import { register } from 'node:module';

register('./check/hooks.mjs', import.meta.url);

let caseNo = 0;

// Imports `script` with `env` as __ENV; runs setup and `iterations` of its
// default function; answers the module and what it sent.
async function run(script, env, iterations = 1) {
  caseNo += 1;
  globalThis.__ENV = env;
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
  return { mod, sent, ...globalThis.__k6 };
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
  globalThis.__ENV = env;
  await assert.rejects(import(`./${script}?case=${caseNo}`), pattern);
}

const cases = {
  async 'create_chat.js sends the strategy, the publish mode and thinks'() {
    const env = { STRATEGY: 'pipeline', PUBLISH_MODE: 'outbox', THINK_TIME: '0.5', MEMBERS: '50', P95_MS: '150' };
    const { mod, sent, sleeps, checks } = await run('create_chat.js', env, 3);
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
      const body = JSON.parse(r.body);
      assert.equal(body.member_ids.length, 49);
      assert.ok(!body.member_ids.includes(body.creator_id));
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
    const { mod, sent } = await run('messages.js', { SCENARIO: 'mix', STRATEGY: 'single', WEIGHTS: '1:1:1' }, 300);
    assertThresholds(mod.options, ['create', 'send', 'read']);
    const ops = new Set(sent.map((r) => r.params.tags.op));
    assert.deepEqual([...ops].sort(), ['create', 'read', 'send']);
    for (const r of sent) {
      const write = r.method === 'POST';
      assert.equal(write, r.params.tags.op !== 'read');
      assert.equal(r.params.headers?.['X-Chatlab-Insert-Strategy'], write ? 'single' : undefined);
    }
  },
  async 'messages.js import sends a job of ROWS messages'() {
    const { mod, sent } = await run('messages.js', { SCENARIO: 'import', ROWS: '250', STRATEGY: 'unnest' }, 1);
    assertThresholds(mod.options, ['import']);
    assert.equal(sent.length, 1);
    assert.match(sent[0].url, /\/messages\/import$/);
    assert.equal(JSON.parse(sent[0].body).messages.length, 250);
    assert.equal(sent[0].params.headers['X-Chatlab-Insert-Strategy'], 'unnest');
  },
  async 'ramp.js ramps 85 to 400 VUs and tags its requests'() {
    const { mod, sent } = await run('ramp.js', { STRATEGY: 'batch' }, 1);
    const s = mod.options.scenarios.ramp;
    assert.equal(s.executor, 'ramping-vus');
    assert.deepEqual(s.stages.map((x) => x.target), [85, 200, 200, 300, 300, 400, 400]);
    assertThresholds(mod.options, ['create']);
    assert.equal(sent[0].params.tags.op, 'create');
    assert.equal(sent[0].params.headers['X-Chatlab-Insert-Strategy'], 'batch');
  },
  async 'bad settings are refused'() {
    await expectRefused('create_chat.js', { STRATEGY: 'bulk' }, /STRATEGY=bulk/);
    await expectRefused('create_chat.js', { PUBLISH_MODE: 'later' }, /PUBLISH_MODE=later/);
    await expectRefused('create_chat.js', { MODEL: 'half-open' }, /MODEL=half-open/);
    await expectRefused('create_chat.js', { VUS: '0' }, /VUS=0/);
    await expectRefused('messages.js', { SCENARIO: 'delete' }, /SCENARIO=delete/);
    await expectRefused('messages.js', { WEIGHTS: '1:2' }, /WEIGHTS=1:2/);
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
