// Live delivery over WebSockets, for users who have k6: LISTENERS members
// hold a connection to GET /v1/ws each, while writers post messages to
// their chats at RATE per second; every listener times each message from
// its `occurred_at` (the write's timestamp, taken by the server on the
// same machine's clock) to its arrival.
//   BASE_URL=http://127.0.0.1:8080 OPS_URL=http://127.0.0.1:9464 CHATLAB_JWT_SECRET=... \
//     LISTENERS=200 RATE=50 DURATION=30s k6 run loadtest/k6/live.js
// DELIVERY_P99_MS (default 1000) fails the run when crossed; so does a
// listener that could not connect. `make loadtest-delivery` measures the
// same path with the harness, per publish mode.
import http from 'k6/http';
import ws from 'k6/ws';
import { check } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import {
  arrivals,
  createChatRequest,
  env,
  seedUsers,
  setupParams,
  thresholds,
  writeParams,
} from './lib/chatlab.js';

const LISTENERS = parseInt(__ENV.LISTENERS || '200', 10);
const CHAT_MEMBERS = parseInt(__ENV.CHAT_MEMBERS || '10', 10);
const DELIVERY_P99_MS = parseInt(__ENV.DELIVERY_P99_MS || '1000', 10);
if (!(LISTENERS >= CHAT_MEMBERS && CHAT_MEMBERS >= 1)) {
  throw new Error(`LISTENERS=${LISTENERS}, CHAT_MEMBERS=${CHAT_MEMBERS}: expected LISTENERS >= CHAT_MEMBERS >= 1`);
}
const CHATS = Math.floor(LISTENERS / CHAT_MEMBERS);

const delivery = new Trend('live_delivery_ms', true);
const received = new Counter('live_messages_received');

// Seconds the run lasts, from DURATION (`30s`, `2m`).
function seconds(duration) {
  const m = /^(\d+)(s|m)$/.exec(duration);
  if (!m) throw new Error(`DURATION=${duration}: expected e.g. 30s or 2m`);
  return parseInt(m[1], 10) * (m[2] === 'm' ? 60 : 1);
}
const RUN_SECONDS = seconds(env.duration);

export const options = {
  scenarios: {
    listeners: { executor: 'per-vu-iterations', vus: CHATS * CHAT_MEMBERS, iterations: 1, exec: 'listen', maxDuration: `${RUN_SECONDS + 30}s` },
    // The listeners connect first.
    writers: arrivals({ exec: 'write', startTime: '3s' }),
  },
  thresholds: Object.assign(thresholds(['send']), {
    live_delivery_ms: [`p(99)<${DELIVERY_P99_MS}`],
    'checks{op:listen}': ['rate>0.99'],
  }),
};

// CHATS chats of CHAT_MEMBERS seeded users, each created by its first
// member; listener i is member i % CHAT_MEMBERS of chat i / CHAT_MEMBERS.
export function setup() {
  const users = seedUsers(CHATS * CHAT_MEMBERS);
  const chats = [];
  for (let i = 0; i < CHATS; i++) {
    const members = [];
    for (let j = 0; j < CHAT_MEMBERS; j++) members.push(i * CHAT_MEMBERS + j);
    const res = http.post(
      ...createChatRequest(`k6 live ${i}`, members.map((m) => users[m]), setupParams(users[members[0]])),
    );
    check(res, { 'seed chat created': (r) => r.status === 201 });
    chats.push({ id: res.json('id'), members });
  }
  return { users, chats };
}

// One listener: a WebSocket as a member, open for the run, timing every
// message it receives.
export function listen(data) {
  const user = data.users[(__VU - 1) % data.users.length];
  const url = `${env.baseUrl.replace(/^http/, 'ws')}/v1/ws`;
  const params = { headers: { Authorization: `Bearer ${user.token}` }, tags: { op: 'listen' } };
  const res = ws.connect(url, params, (socket) => {
    socket.on('message', (text) => {
      const frame = JSON.parse(text);
      if (frame.type !== 'message.sent') return;
      delivery.add(Date.now() - Date.parse(frame.data.occurred_at));
      received.add(1);
    });
    socket.setTimeout(() => socket.close(), (RUN_SECONDS + 6) * 1000);
  });
  check(res, { 'live socket opened': (r) => r && r.status === 101 }, { op: 'listen' });
}

// One message, from a member of a chat picked at random.
export function write(data) {
  const chat = data.chats[Math.floor(Math.random() * data.chats.length)];
  const sender = data.users[chat.members[Math.floor(Math.random() * chat.members.length)]];
  const res = http.post(
    `${env.baseUrl}/v1/chats/${chat.id}/messages`,
    JSON.stringify({ body: 'live from k6' }),
    writeParams('send', sender),
  );
  check(res, { 'message sent': (r) => r.status === 201 });
}
