// send-message, read-messages, import jobs or a weighted mix, for users who have k6:
//   BASE_URL=http://127.0.0.1:8080 OPS_URL=http://127.0.0.1:9464 CHATLAB_JWT_SECRET=... \
//     SCENARIO=mix VUS=40 DURATION=30s k6 run loadtest/k6/messages.js
// SCENARIO: send (POST messages), read (GET newest 20), import (POST an
// import job of ROWS messages), mix (WEIGHTS=create:send:read, default 1:3:6).
// Every request goes as a seeded user with its token: a message is sent
// and read by a member of its chat, an import job by the chat's creator.
// Settings shared by every script: lib/chatlab.js.
import http from 'k6/http';
import { check } from 'k6';
import {
  createChatRequest,
  env,
  pickMembers,
  readParams,
  scenario,
  seedUsers,
  setupParams,
  think,
  thresholds,
  writeParams,
} from './lib/chatlab.js';

const SCENARIO = __ENV.SCENARIO || 'mix';
const MEMBERS = parseInt(__ENV.MEMBERS || '20', 10);
const ROWS = parseInt(__ENV.ROWS || '1000', 10);
const WEIGHTS = (__ENV.WEIGHTS || '1:3:6').split(':').map((w) => parseInt(w, 10));
const CHATS = 50;
const CHAT_MEMBERS = 10;
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

// Users with their tokens, and CHATS chats of CHAT_MEMBERS of them, each
// created by its first member; a chat keeps its members as indices into
// `users` (the creator first), so each token is in the setup data once.
export function setup() {
  const users = seedUsers(Math.max(1000, CHATS * CHAT_MEMBERS));
  const chats = [];
  for (let i = 0; i < CHATS; i++) {
    const members = [];
    for (let j = 0; j < CHAT_MEMBERS; j++) members.push(i * CHAT_MEMBERS + j);
    const creator = users[members[0]];
    const res = http.post(
      ...createChatRequest(`k6 seed ${i}`, members.map((m) => users[m]), setupParams(creator)),
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
  const res = http.post(...createChatRequest('k6', pickMembers(data.users, MEMBERS)));
  check(res, { 'chat created': (r) => r.status === 201 });
}

function send(data) {
  const chat = pick(data.chats);
  const sender = data.users[pick(chat.members)];
  const res = http.post(
    `${env.baseUrl}/v1/chats/${chat.id}/messages`,
    JSON.stringify({ body: 'hello from k6' }),
    writeParams('send', sender),
  );
  check(res, { 'message sent': (r) => r.status === 201 });
}

function read(data) {
  const chat = pick(data.chats);
  const reader = data.users[pick(chat.members)];
  const res = http.get(`${env.baseUrl}/v1/chats/${chat.id}/messages?limit=20`, readParams('read', reader));
  check(res, { 'messages read': (r) => r.status === 200 });
}

// An import job into the first chat, as its creator (imports need the
// owner's token); each message still names its sender, a member.
function importJob(data) {
  const chat = data.chats[0];
  const messages = [];
  for (let i = 0; i < ROWS; i++) {
    const sender = data.users[chat.members[i % chat.members.length]];
    messages.push({ sender_id: sender.id, body: `imported message ${i} from k6` });
  }
  const res = http.post(
    `${env.baseUrl}/v1/chats/${chat.id}/messages/import`,
    JSON.stringify({ messages }),
    writeParams('import', data.users[chat.members[0]]),
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
