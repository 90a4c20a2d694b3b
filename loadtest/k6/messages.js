// send-message, read-messages or a weighted mix, for users who have k6:
//   BASE_URL=http://127.0.0.1:8080 SCENARIO=mix VUS=40 DURATION=30s k6 run loadtest/k6/messages.js
// SCENARIO: send (POST messages), read (GET newest 20), mix (WEIGHTS=create:send:read, default 1:3:6).
import http from 'k6/http';
import { check } from 'k6';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const SCENARIO = __ENV.SCENARIO || 'mix';
const VUS = parseInt(__ENV.VUS || '40', 10);
const DURATION = __ENV.DURATION || '30s';
const MEMBERS = parseInt(__ENV.MEMBERS || '20', 10);
const WEIGHTS = (__ENV.WEIGHTS || '1:3:6').split(':').map((w) => parseInt(w, 10));
const CHATS = 50;

export const options = {
  scenarios: { messages: { executor: 'constant-vus', vus: VUS, duration: DURATION } },
  thresholds: { http_req_failed: ['rate<0.01'] },
};

const JSON_HEADERS = { 'Content-Type': 'application/json' };

export function setup() {
  const users = http.post(`${BASE_URL}/v1/users/bulk`, JSON.stringify({ count: 1000 }), {
    headers: JSON_HEADERS,
  }).json('ids');
  const chats = [];
  for (let i = 0; i < CHATS; i++) {
    const members = users.slice(i * 10, i * 10 + 10);
    const res = http.post(
      `${BASE_URL}/v1/chats`,
      JSON.stringify({ name: `k6 seed ${i}`, creator_id: members[0], member_ids: members.slice(1) }),
      { headers: JSON_HEADERS },
    );
    chats.push({ id: res.json('id'), members });
  }
  return { users, chats };
}

function pick(list) {
  return list[Math.floor(Math.random() * list.length)];
}

function createChat(data) {
  const start = Math.floor(Math.random() * (data.users.length - MEMBERS));
  const members = data.users.slice(start, start + MEMBERS);
  const res = http.post(
    `${BASE_URL}/v1/chats`,
    JSON.stringify({ name: 'k6', creator_id: members[0], member_ids: members.slice(1) }),
    { headers: JSON_HEADERS, tags: { op: 'create' } },
  );
  check(res, { 'chat created': (r) => r.status === 201 });
}

function send(data) {
  const chat = pick(data.chats);
  const res = http.post(
    `${BASE_URL}/v1/chats/${chat.id}/messages`,
    JSON.stringify({ sender_id: pick(chat.members), body: 'hello from k6' }),
    { headers: JSON_HEADERS, tags: { op: 'send' } },
  );
  check(res, { 'message sent': (r) => r.status === 201 });
}

function read(data) {
  const chat = pick(data.chats);
  const res = http.get(`${BASE_URL}/v1/chats/${chat.id}/messages?limit=20`, { tags: { op: 'read' } });
  check(res, { 'messages read': (r) => r.status === 200 });
}

export default function (data) {
  if (SCENARIO === 'send') {
    send(data);
  } else if (SCENARIO === 'read') {
    read(data);
  } else {
    const total = WEIGHTS[0] + WEIGHTS[1] + WEIGHTS[2];
    const x = Math.random() * total;
    if (x < WEIGHTS[0]) {
      createChat(data);
    } else if (x < WEIGHTS[0] + WEIGHTS[1]) {
      send(data);
    } else {
      read(data);
    }
  }
}
