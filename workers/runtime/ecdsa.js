// ECDSA for `crypto.subtle` (P-256, P-384, P-521), with @noble/curves.
//
// StarlingMonkey's own ECDSA cannot serve here: it has no `generateKey`,
// and its OpenSSL draws randomness through the preview1 adapter's
// `random_get`, which traps in a snapshotted component (importing a
// private key or signing ends the instance). These keys draw from
// `crypto.getRandomValues` (wasi:random) instead. Digests stay native.
//
// Keys are `CryptoKey`s (their prototype) whose public fields are own
// properties; the key material lives in a WeakMap the Worker cannot reach.

const CURVES = {
  'P-256': { noble: 'p256', size: 32, oid: [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07] },
  'P-384': { noble: 'p384', size: 48, oid: [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22] },
  'P-521': { noble: 'p521', size: 66, oid: [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23] },
};

// The curves are built at first use, not at load: building one probes the
// random source, which must not run in the snapshot (there is none there).
let nist;
async function loadCurves() {
  if (!nist) {
    nist = await import('@noble/curves/nist.js');
    for (const curve of Object.values(CURVES)) curve.ecdsa = nist[curve.noble];
  }
}
// id-ecPublicKey (1.2.840.10045.2.1).
const EC_PUBLIC_KEY = [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const HASHES = new Set(['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512']);

const material = new WeakMap();

function domError(message, name) {
  return new DOMException(message, name);
}

function algorithmName(algorithm) {
  return typeof algorithm === 'string' ? algorithm : algorithm && algorithm.name;
}

/** Whether `algorithm` is ECDSA (which this module serves). */
export function isEcdsa(algorithm) {
  const name = algorithmName(algorithm);
  return typeof name === 'string' && name.toUpperCase() === 'ECDSA';
}

/** Whether `key` is one of this module's keys. */
export function isEcdsaKey(key) {
  return material.has(key);
}

function curveOf(algorithm) {
  const named = algorithm && algorithm.namedCurve;
  const curve = CURVES[named];
  if (!curve) throw domError(`Unrecognized or unimplemented EC curve "${named}" requested.`, 'NotSupportedError');
  return [named, curve];
}

function hashName(hash) {
  const name = (typeof hash === 'string' ? hash : hash && hash.name || '').toUpperCase();
  if (!HASHES.has(name)) throw domError(`Unrecognized hash "${name}".`, 'NotSupportedError');
  return name;
}

function bytes(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('Expected an ArrayBuffer or ArrayBufferView.');
}

function b64url(data) {
  let s = '';
  for (const b of data) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function unb64url(text) {
  if (typeof text !== 'string') throw domError('Invalid JWK: a key field is not a string.', 'DataError');
  const s = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function makeKey(type, named, extractable, usages, secret, point) {
  const key = Object.create(CryptoKey.prototype);
  const algorithm = Object.freeze({ name: 'ECDSA', namedCurve: named });
  Object.defineProperties(key, {
    type: { value: type, enumerable: true },
    extractable: { value: extractable, enumerable: true },
    algorithm: { value: algorithm, enumerable: true },
    usages: { value: Object.freeze([...usages]), enumerable: true },
  });
  material.set(key, { named, secret, point });
  return key;
}

function checkUsages(usages, allowed) {
  for (const u of usages) {
    if (!allowed.includes(u)) throw domError(`Unsupported key usage for an ECDSA key: "${u}".`, 'SyntaxError');
  }
}

// -- DER, just enough for SPKI and PKCS#8 EC keys --

function derLength(n) {
  if (n < 0x80) return [n];
  const out = [];
  while (n > 0) {
    out.unshift(n & 0xff);
    n >>= 8;
  }
  return [0x80 | out.length, ...out];
}

function der(tag, ...parts) {
  const body = parts.flatMap((p) => [...p]);
  return [tag, ...derLength(body.length), ...body];
}

/** Reads one TLV at `at`: [tag, contents start, end]. */
function readTlv(buf, at) {
  if (at + 2 > buf.length) throw domError('Invalid key data: truncated DER.', 'DataError');
  const tag = buf[at];
  let len = buf[at + 1];
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 3) throw domError('Invalid key data: bad DER length.', 'DataError');
    len = 0;
    for (let i = 0; i < n; i++) len = (len << 8) | buf[start + i];
    start += n;
  }
  if (start + len > buf.length) throw domError('Invalid key data: truncated DER.', 'DataError');
  return [tag, start, start + len];
}

function children(buf, start, end) {
  const out = [];
  for (let at = start; at < end;) {
    const tlv = readTlv(buf, at);
    out.push(tlv);
    at = tlv[2];
  }
  return out;
}

function sameBytes(buf, [, start, end], expected) {
  const tlvBytes = buf.subarray(start - 2, end);
  return tlvBytes.length === expected.length && tlvBytes.every((b, i) => b === expected[i]);
}

function checkAlgorithmIdentifier(buf, tlv, curve) {
  const [idKind, idCurve] = children(buf, tlv[1], tlv[2]);
  if (!idKind || !sameBytes(buf, idKind, EC_PUBLIC_KEY)) throw domError('Invalid key data: not an EC key.', 'DataError');
  if (!idCurve || !sameBytes(buf, idCurve, curve.oid)) throw domError('Invalid key data: the key is for another curve.', 'DataError');
}

function spkiPoint(buf, curve) {
  const [seq] = children(buf, 0, buf.length);
  const [alg, bits] = children(buf, seq[1], seq[2]);
  checkAlgorithmIdentifier(buf, alg, curve);
  if (bits[0] !== 0x03 || buf[bits[1]] !== 0) throw domError('Invalid key data: bad public key bits.', 'DataError');
  return buf.slice(bits[1] + 1, bits[2]);
}

function pkcs8Secret(buf, curve) {
  const [seq] = children(buf, 0, buf.length);
  const [, alg, octets] = children(buf, seq[1], seq[2]);
  checkAlgorithmIdentifier(buf, alg, curve);
  const [inner] = children(buf, octets[1], octets[2]);
  const fields = children(buf, inner[1], inner[2]);
  const secret = fields[1];
  if (!secret || secret[0] !== 0x04) throw domError('Invalid key data: no private key.', 'DataError');
  return buf.slice(secret[1], secret[2]);
}

function spkiOf(curve, point) {
  return new Uint8Array(der(0x30, der(0x30, EC_PUBLIC_KEY, curve.oid), der(0x03, [0], point)));
}

function pkcs8Of(curve, secret, point) {
  const ecPrivateKey = der(0x30, [0x02, 0x01, 0x01], der(0x04, secret), der(0xa1, der(0x03, [0], point)));
  return new Uint8Array(der(0x30, [0x02, 0x01, 0x00], der(0x30, EC_PUBLIC_KEY, curve.oid), der(0x04, ecPrivateKey)));
}

// -- the subtle operations --

export async function generateKey(algorithm, extractable, usages) {
  await loadCurves();
  const [named, curve] = curveOf(algorithm);
  checkUsages(usages, ['sign', 'verify']);
  if (!usages.includes('sign')) throw domError('An ECDSA private key must be usable to sign.', 'SyntaxError');
  const secret = curve.ecdsa.utils.randomSecretKey();
  const point = curve.ecdsa.getPublicKey(secret, false);
  return {
    publicKey: makeKey('public', named, true, usages.filter((u) => u === 'verify'), null, point),
    privateKey: makeKey('private', named, extractable, usages.filter((u) => u === 'sign'), secret, point),
  };
}

export async function importKey(format, keyData, algorithm, extractable, usages) {
  await loadCurves();
  const [named, curve] = curveOf(algorithm);
  const fromPoint = (point) => {
    if (!curve.ecdsa.utils.isValidPublicKey(point, point.length === curve.size + 1)) {
      throw domError('Invalid key data: not a point on the curve.', 'DataError');
    }
    checkUsages(usages, ['verify']);
    return makeKey('public', named, extractable, usages, null, curve.ecdsa.Point.fromBytes(point).toBytes(false));
  };
  const fromSecret = (secret, point) => {
    if (!curve.ecdsa.utils.isValidSecretKey(secret)) throw domError('Invalid key data: bad private key.', 'DataError');
    checkUsages(usages, ['sign']);
    return makeKey('private', named, extractable, usages, secret, point || curve.ecdsa.getPublicKey(secret, false));
  };
  switch (format) {
    case 'raw':
      return fromPoint(bytes(keyData));
    case 'spki':
      return fromPoint(spkiPoint(bytes(keyData), curve));
    case 'pkcs8':
      return fromSecret(pkcs8Secret(bytes(keyData), curve));
    case 'jwk': {
      const jwk = keyData;
      if (!jwk || jwk.kty !== 'EC') throw domError('Invalid JWK: kty must be "EC".', 'DataError');
      if (jwk.crv !== named) throw domError(`Invalid JWK: crv ${jwk.crv} does not match ${named}.`, 'DataError');
      const point = new Uint8Array([4, ...unb64url(jwk.x), ...unb64url(jwk.y)]);
      if (point.length !== 2 * curve.size + 1) throw domError('Invalid JWK: bad coordinate length.', 'DataError');
      if (jwk.d !== undefined) {
        const secret = unb64url(jwk.d);
        if (secret.length !== curve.size) throw domError('Invalid JWK: bad private key length.', 'DataError');
        const key = fromSecret(secret, point);
        if (!curve.ecdsa.getPublicKey(secret, false).every((b, i) => b === point[i])) {
          throw domError('Invalid JWK: the private key does not match x and y.', 'DataError');
        }
        return key;
      }
      return fromPoint(point);
    }
    default:
      throw domError(`Unsupported key format "${format}" for ECDSA.`, 'NotSupportedError');
  }
}

export async function exportKey(format, key) {
  await loadCurves();
  const { named, secret, point } = material.get(key);
  const curve = CURVES[named];
  if (!key.extractable) throw domError('Key is not extractable.', 'InvalidAccessError');
  const half = (from) => point.slice(from, from + curve.size);
  switch (format) {
    case 'raw':
      if (secret) throw domError('Only public ECDSA keys export as raw.', 'InvalidAccessError');
      return point.slice().buffer;
    case 'spki':
      if (secret) throw domError('Only public keys export as spki.', 'InvalidAccessError');
      return spkiOf(curve, point).buffer;
    case 'pkcs8':
      if (!secret) throw domError('Only private keys export as pkcs8.', 'InvalidAccessError');
      return pkcs8Of(curve, secret, point).buffer;
    case 'jwk': {
      const jwk = { kty: 'EC', crv: named, x: b64url(half(1)), y: b64url(half(1 + curve.size)), key_ops: [...key.usages], ext: true };
      if (secret) jwk.d = b64url(secret);
      return jwk;
    }
    default:
      throw domError(`Unsupported key format "${format}" for ECDSA.`, 'NotSupportedError');
  }
}

async function digestFor(algorithm, data, digest) {
  return new Uint8Array(await digest(hashName(algorithm.hash), bytes(data)));
}

export async function sign(algorithm, key, data, digest) {
  await loadCurves();
  const m = material.get(key);
  if (key.type !== 'private' || !key.usages.includes('sign')) throw domError('The key cannot be used to sign.', 'InvalidAccessError');
  const hash = await digestFor(algorithm, data, digest);
  return CURVES[m.named].ecdsa.sign(hash, m.secret, { prehash: false, lowS: false }).slice().buffer;
}

export async function verify(algorithm, key, signature, data, digest) {
  await loadCurves();
  const m = material.get(key);
  if (key.type !== 'public' || !key.usages.includes('verify')) throw domError('The key cannot be used to verify.', 'InvalidAccessError');
  const curve = CURVES[m.named];
  const sig = bytes(signature);
  if (sig.length !== 2 * curve.size) return false;
  const hash = await digestFor(algorithm, data, digest);
  try {
    return curve.ecdsa.verify(sig, hash, m.point, { prehash: false, lowS: false });
  } catch {
    return false;
  }
}
