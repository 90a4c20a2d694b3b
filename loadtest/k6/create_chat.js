// createChat under load, for users who have k6 (https://k6.io):
//   BASE_URL=http://127.0.0.1:8080 OPS_URL=http://127.0.0.1:9464 CHATLAB_JWT_SECRET=... \
//     MEMBERS=50 VUS=60 DURATION=30s STRATEGY=single k6 run loadtest/k6/create_chat.js
//   MODEL=open RATE=500 STRATEGY=single k6 run loadtest/k6/create_chat.js
// Settings shared by every script (OPS_URL, CHATLAB_JWT_SECRET, MODEL, RATE,
// THINK_TIME, STRATEGY, PUBLISH_MODE, thresholds): lib/chatlab.js. MEMBERS
// counts the creator, who sends the request (its token) and is not listed.
import http from 'k6/http';
import { check } from 'k6';
import { createChatRequest, pickMembers, scenario, seedUsers, think, thresholds } from './lib/chatlab.js';

const MEMBERS = parseInt(__ENV.MEMBERS || '50', 10);
const USERS = Math.max(MEMBERS * 4, 1000);

export const options = {
  scenarios: { create_chat: scenario() },
  thresholds: thresholds(['create']),
};

export function setup() {
  return { users: seedUsers(USERS) };
}

export default function (data) {
  const members = pickMembers(data.users, MEMBERS);
  const res = http.post(...createChatRequest(`k6-${__VU}-${__ITER}`, members));
  check(res, { 'chat created': (r) => r.status === 201 });
  think();
}
