// The seed 000 ramp on createChat, for users who have k6:
//   BASE_URL=http://127.0.0.1:8080 OPS_URL=http://127.0.0.1:9464 CHATLAB_JWT_SECRET=... \
//     MEMBERS=50 STAGE=30s STRATEGY=batch k6 run loadtest/k6/ramp.js
// 85 -> 200 -> 300 -> 400 VUs, STAGE each (MODEL and VUS do not apply).
// Settings shared by every script: lib/chatlab.js.
import http from 'k6/http';
import { check } from 'k6';
import { createChatRequest, pickMembers, seedUsers, think, thresholds } from './lib/chatlab.js';

const MEMBERS = parseInt(__ENV.MEMBERS || '50', 10);
const STAGE = __ENV.STAGE || '30s';

export const options = {
  scenarios: {
    ramp: {
      executor: 'ramping-vus',
      startVUs: 85,
      stages: [
        { duration: STAGE, target: 85 },
        { duration: '0s', target: 200 },
        { duration: STAGE, target: 200 },
        { duration: '0s', target: 300 },
        { duration: STAGE, target: 300 },
        { duration: '0s', target: 400 },
        { duration: STAGE, target: 400 },
      ],
    },
  },
  thresholds: thresholds(['create']),
};

export function setup() {
  return { users: seedUsers(2000) };
}

export default function (data) {
  const members = pickMembers(data.users, MEMBERS);
  const res = http.post(...createChatRequest('k6 ramp', members));
  check(res, { 'chat created': (r) => r.status === 201 });
  think();
}
