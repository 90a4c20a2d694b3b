// createChat under load, for users who have k6 (https://k6.io):
//   BASE_URL=http://127.0.0.1:8080 MEMBERS=50 VUS=60 DURATION=30s STRATEGY=single k6 run loadtest/k6/create_chat.js
//   MODEL=open RATE=500 STRATEGY=single k6 run loadtest/k6/create_chat.js
// Settings shared by every script (MODEL, RATE, THINK_TIME, STRATEGY,
// PUBLISH_MODE, thresholds): lib/chatlab.js. MEMBERS counts the creator.
import http from 'k6/http';
import { check } from 'k6';
import { env, pickMembers, scenario, think, thresholds, writeParams } from './lib/chatlab.js';

const MEMBERS = parseInt(__ENV.MEMBERS || '50', 10);
const USERS = Math.max(MEMBERS * 4, 1000);

export const options = {
  scenarios: { create_chat: scenario() },
  thresholds: thresholds(['create']),
};

export function setup() {
  const res = http.post(`${env.baseUrl}/v1/users/bulk`, JSON.stringify({ count: USERS }), {
    headers: { 'Content-Type': 'application/json' },
    tags: { op: 'setup' },
  });
  check(res, { 'users seeded': (r) => r.status === 201 });
  return { ids: res.json('ids') };
}

export default function (data) {
  const members = pickMembers(data.ids, MEMBERS);
  const res = http.post(
    `${env.baseUrl}/v1/chats`,
    JSON.stringify({ name: `k6-${__VU}-${__ITER}`, creator_id: members[0], member_ids: members.slice(1) }),
    writeParams('create'),
  );
  check(res, { 'chat created': (r) => r.status === 201 });
  think();
}
