// The seed 000 ramp on createChat, for users who have k6:
//   BASE_URL=http://127.0.0.1:8080 MEMBERS=50 STAGE=30s k6 run loadtest/k6/ramp.js
import http from 'k6/http';
import { check } from 'k6';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
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
  thresholds: { http_req_failed: ['rate<0.01'] },
};

const JSON_HEADERS = { 'Content-Type': 'application/json' };

export function setup() {
  const res = http.post(`${BASE_URL}/v1/users/bulk`, JSON.stringify({ count: 2000 }), {
    headers: JSON_HEADERS,
  });
  return { ids: res.json('ids') };
}

export default function (data) {
  const start = Math.floor(Math.random() * (data.ids.length - MEMBERS));
  const members = data.ids.slice(start, start + MEMBERS);
  const res = http.post(
    `${BASE_URL}/v1/chats`,
    JSON.stringify({ name: 'k6 ramp', creator_id: members[0], member_ids: members.slice(1) }),
    { headers: JSON_HEADERS },
  );
  check(res, { 'chat created': (r) => r.status === 201 });
}
