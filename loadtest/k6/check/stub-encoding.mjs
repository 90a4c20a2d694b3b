// A stand-in for k6's `k6/encoding`: base64 with k6's four variants (std,
// rawstd, url, rawurl: raw ones unpadded, url ones with - and _).
function variant(encoding = 'std') {
  if (!['std', 'rawstd', 'url', 'rawurl'].includes(encoding)) {
    throw new Error(`k6/encoding stub: unknown encoding ${encoding}`);
  }
  return { url: encoding.endsWith('url'), raw: encoding.startsWith('raw') };
}

export function b64encode(input, encoding) {
  const { url, raw } = variant(encoding);
  let s = (typeof input === 'string' ? Buffer.from(input, 'utf8') : Buffer.from(input)).toString('base64');
  if (url) s = s.replace(/\+/g, '-').replace(/\//g, '_');
  if (raw) s = s.replace(/=+$/, '');
  return s;
}

export function b64decode(input, encoding, format) {
  variant(encoding);
  const buf = Buffer.from(input.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return format === 's' ? buf.toString('utf8') : buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
}

export default { b64encode, b64decode };
