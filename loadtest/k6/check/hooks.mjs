// Module hooks for check.mjs: `k6` and `k6/http` resolve to the recording
// stubs beside this file, and a script imported with a `?case=` query
// passes it on to its own imports (lib/chatlab.js), so each case reads
// its own __ENV instead of a cached module's.
export async function resolve(specifier, context, next) {
  if (specifier === 'k6' || specifier === 'k6/http') {
    const name = specifier === 'k6' ? 'k6' : 'http';
    return { url: new URL(`./stub-${name}.mjs`, import.meta.url).href, shortCircuit: true };
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
