// A stand-in for k6's `k6/crypto`, on node's crypto: the HMAC the scripts
// sign tokens with, with k6's names for the output encodings.
import { createHmac } from 'node:crypto';

function encode(buf, outputEncoding) {
  switch (outputEncoding) {
    case 'hex':
      return buf.toString('hex');
    case 'base64':
      return buf.toString('base64');
    case 'base64url': // k6: URL alphabet, padded
      return buf.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
    case 'base64rawurl': // k6: URL alphabet, no padding
      return buf.toString('base64url');
    case 'binary':
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
    default:
      throw new Error(`k6/crypto stub: unknown output encoding ${outputEncoding}`);
  }
}

// k6: hmac(algorithm, secret, data, outputEncoding); a string secret or
// data counts as its UTF-8 bytes.
export function hmac(algorithm, secret, data, outputEncoding) {
  const names = { sha256: 'sha256', sha384: 'sha384', sha512: 'sha512', sha1: 'sha1', md5: 'md5' };
  if (!names[algorithm]) throw new Error(`k6/crypto stub: unknown algorithm ${algorithm}`);
  const mac = createHmac(names[algorithm], typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret));
  mac.update(typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data));
  return encode(mac.digest(), outputEncoding);
}

export default { hmac };
