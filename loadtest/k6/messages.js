// send-message, read-messages, import jobs or a weighted mix, for users who have k6:
//   BASE_URL=http://127.0.0.1:8080 SCENARIO=mix VUS=40 DURATION=30s k6 run loadtest/k6/messages.js
// SCENARIO: send (POST messages), read (GET newest 20), import (POST an
// import job of ROWS messages), mix (WEIGHTS=create:send:read, default 1:3:6).
// Settings shared by every script: lib/chatlab.js.
import http from 'k6/http';
import { check } from 'k6';
import { env, pickMembers, readParams, scenario, think, thresholds, writeParams } from './lib/chatlab.js';

const SCENARIO = __ENV.SCENARIO || 'mix';
const MEMBERS = parseInt(__ENV.MEMBERS || '20', 10);
const ROWS = parseInt(__ENV.ROWS || '1000', 10);
const WEIGHTS = (__ENV.WEIGHTS || '1:3:6').split(':').map((w) => parseInt(w, 10));
const CHATS = 50;
const OPS = { send: ['send'], read: ['read'], import: ['import'], mix: ['create', 'send', 'read'] };
if (!OPS[SCENARIO]) {
  throw new Error(`SCENARIO=${SCENARIO}: expected one of ${Object.keys(OPS).join(', ')}`);
}
if (WEIGHTS.length !== 3 || WEIGHTS.some((w) => !(w >= 0)) || WEIGHTS[0] + WEIGHTS[1] + WEIGHTS[2] === 0) {
  throw new Error(`WEIGHTS=${__ENV.WEIGHTS}: expected create:send:read, e.g. 1:3:6`);
}

export const options = {
  scenarios: { messages: scenario() },
  thresholds: thresholds(OPS[SCENARIO]),
};

export function setup() {
  const json = { headers: { 'Content-Type': 'application/json' }, tags: { op: 'setup' } };
  const users = http.post(`${env.baseUrl}/v1/users/bulk`, JSON.stringify({ count: 1000 }), json).json('ids');
  const chats = [];
  for (let i = 0; i < CHATS; i++) {
    const members = users.slice(i * 10, i * 10 + 10);
    const res = http.post(
      `${env.baseUrl}/v1/chats`,
      JSON.stringify({ name: `k6 seed ${i}`, creator_id: members[0], member_ids: members.slice(1) }),
      json,
    );
    check(res, { 'seed chat created': (r) => r.status === 201 });
    chats.push({ id: res.json('id'), members });
  }
  return { users, chats };
}

function pick(list) {
  return list[Math.floor(Math.random() * list.length)];
}

function createChat(data) {
  const members = pickMembers(data.users, MEMBERS);
  const res = http.post(
    `${env.baseUrl}/v1/chats`,
    JSON.stringify({ name: 'k6', creator_id: members[0], member_ids: members.slice(1) }),
    writeParams('create'),
  );
  check(res, { 'chat created': (r) => r.status === 201 });
}

function send(data) {
  const chat = pick(data.chats);
  const res = http.post(
    `${env.baseUrl}/v1/chats/${chat.id}/messages`,
    JSON.stringify({ sender_id: pick(chat.members), body: 'hello from k6' }),
    writeParams('send'),
  );
  check(res, { 'message sent': (r) => r.status === 201 });
}

function read(data) {
  const chat = pick(data.chats);
  const res = http.get(`${env.baseUrl}/v1/chats/${chat.id}/messages?limit=20`, readParams('read'));
  check(res, { 'messages read': (r) => r.status === 200 });
}

function importJob(data) {
  const chat = data.chats[0];
  const messages = [];
  for (let i = 0; i < ROWS; i++) {
    messages.push({ sender_id: chat.members[i % chat.members.length], body: `imported message ${i} from k6` });
  }
  const res = http.post(
    `${env.baseUrl}/v1/chats/${chat.id}/messages/import`,
    JSON.stringify({ messages }),
    writeParams('import'),
  );
  check(res, { 'import job done': (r) => r.status === 201 });
}

export default function (data) {
  if (SCENARIO === 'send') {
    send(data);
  } else if (SCENARIO === 'read') {
    read(data);
  } else if (SCENARIO === 'import') {
    importJob(data);
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
  think();
}
