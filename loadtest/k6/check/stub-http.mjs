// A stand-in for k6's `k6/http`: records every request and answers as
// chatlab would, without a network.
let next = 0;
function fakeId() {
  next += 1;
  return `00000000-0000-4000-8000-${String(next).padStart(12, '0')}`;
}

function respond(method, url, body) {
  const path = new URL(url).pathname;
  let status = 200;
  let json = {};
  if (method === 'POST' && path === '/v1/users/bulk') {
    status = 201;
    json = { ids: Array.from({ length: JSON.parse(body).count }, fakeId) };
  } else if (method === 'POST') {
    status = 201;
    json = { id: fakeId() };
  }
  return {
    status,
    json(selector) {
      return selector ? json[selector] : json;
    },
  };
}

function record(method, url, body, params) {
  globalThis.__k6.requests.push({ method, url, body, params: params || {} });
  return respond(method, url, body);
}

export default {
  post: (url, body, params) => record('POST', url, body, params),
  get: (url, params) => record('GET', url, undefined, params),
};
