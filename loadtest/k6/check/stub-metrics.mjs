// A stand-in for k6's `k6/metrics`: Trend and Counter record what they are
// given under their name.
function recorder(name) {
  globalThis.__k6.metrics = globalThis.__k6.metrics || {};
  return (value) => {
    (globalThis.__k6.metrics[name] = globalThis.__k6.metrics[name] || []).push(value);
  };
}

export class Trend {
  constructor(name) {
    this.name = name;
  }
  add(value) {
    recorder(this.name)(value);
  }
}

export class Counter extends Trend {}
