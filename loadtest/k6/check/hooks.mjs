// Module hooks for check.mjs: `k6`, `k6/http`, `k6/crypto`, `k6/encoding`,
// `k6/ws` and `k6/metrics` resolve to the stubs beside this file, and a script
// imported with a `?case=` query passes it on to its own imports
// (lib/chatlab.js), so each case reads its own __ENV instead of a cached
// module's.
const STUBS = {
  k6: 'k6',
  'k6/http': 'http',
  'k6/crypto': 'crypto',
  'k6/encoding': 'encoding',
  'k6/ws': 'ws',
  'k6/metrics': 'metrics',
};

export async function resolve(specifier, context, next) {
  if (Object.hasOwn(STUBS, specifier)) {
    const url = new URL(`./stub-${STUBS[specifier]}.mjs`, import.meta.url).href;
    return { url, shortCircuit: true };
  }
  const resolved = await next(specifier, context);
  const parent = context.parentURL ? new URL(context.parentURL) : null;
  const url = new URL(resolved.url);
  if (parent && parent.search && url.protocol === 'file:' && !url.search) {
    url.search = parent.search;
    return { ...resolved, url: url.href };
  }
  return resolved;
}
