// createChat under load, for users who have k6 (https://k6.io):
//   BASE_URL=http://127.0.0.1:8080 MEMBERS=50 VUS=60 DURATION=30s STRATEGY=batch k6 run loadtest/k6/create_chat.js
// STRATEGY is sent as X-Chatlab-Insert-Strategy, which the server honours
// only with CHATLAB_ALLOW_OVERRIDES=true; leave it empty to use the server's.
import http from 'k6/http';
import { check } from 'k6';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const MEMBERS = parseInt(__ENV.MEMBERS || '50', 10);
const VUS = parseInt(__ENV.VUS || '60', 10);
const DURATION = __ENV.DURATION || '30s';
const STRATEGY = __ENV.STRATEGY || '';
const USERS = Math.max(MEMBERS * 4, 1000);

export const options = {
  scenarios: {
    create_chat: { executor: 'constant-vus', vus: VUS, duration: DURATION },
  },
  thresholds: { http_req_failed: ['rate<0.01'] },
};

const JSON_HEADERS = { 'Content-Type': 'application/json' };

export function setup() {
  const res = http.post(`${BASE_URL}/v1/users/bulk`, JSON.stringify({ count: USERS }), {
    headers: JSON_HEADERS,
  });
  check(res, { 'users seeded': (r) => r.status === 201 });
  return { ids: res.json('ids') };
}

export default function (data) {
  const ids = data.ids;
  const start = Math.floor(Math.random() * (ids.length - MEMBERS));
  const members = ids.slice(start, start + MEMBERS);
  const headers = Object.assign({}, JSON_HEADERS);
  if (STRATEGY) {
    headers['X-Chatlab-Insert-Strategy'] = STRATEGY;
  }
  const res = http.post(
    `${BASE_URL}/v1/chats`,
    JSON.stringify({ name: `k6-${__VU}-${__ITER}`, creator_id: members[0], member_ids: members.slice(1) }),
    { headers, tags: { strategy: STRATEGY || 'server-default' } },
  );
  check(res, { 'chat created': (r) => r.status === 201 });
}
