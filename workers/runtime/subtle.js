// `crypto.subtle` as Workers have it: ECDSA from ./ecdsa.js (see why
// there), `generateKey` for HMAC and AES from random bytes and the native
// import, everything else native.

import * as ecdsa from './ecdsa.js';

const subtle = globalThis.crypto && globalThis.crypto.subtle;

if (subtle) {
  const native = {};
  for (const name of ['importKey', 'exportKey', 'sign', 'verify', 'digest', 'generateKey']) {
    native[name] = typeof subtle[name] === 'function' ? subtle[name].bind(subtle) : undefined;
  }
  const digest = (hash, data) => native.digest(hash, data);
  const define = (name, fn) => Object.defineProperty(subtle, name, { value: fn, writable: true, configurable: true });

  define('importKey', (format, keyData, algorithm, extractable, usages) =>
    ecdsa.isEcdsa(algorithm)
      ? ecdsa.importKey(format, keyData, algorithm, extractable, usages)
      : native.importKey(format, keyData, algorithm, extractable, usages));

  define('exportKey', (format, key) =>
    ecdsa.isEcdsaKey(key) ? ecdsa.exportKey(format, key) : native.exportKey(format, key));

  define('sign', (algorithm, key, data) =>
    ecdsa.isEcdsaKey(key) ? ecdsa.sign(algorithm, key, data, digest) : native.sign(algorithm, key, data));

  define('verify', (algorithm, key, signature, data) =>
    ecdsa.isEcdsaKey(key)
      ? ecdsa.verify(algorithm, key, signature, data, digest)
      : native.verify(algorithm, key, signature, data));

  define('generateKey', async (algorithm, extractable, usages) => {
    if (ecdsa.isEcdsa(algorithm)) return ecdsa.generateKey(algorithm, extractable, usages);
    const name = (typeof algorithm === 'string' ? algorithm : algorithm.name || '').toUpperCase();
    if (name === 'HMAC') {
      const hash = typeof algorithm.hash === 'string' ? algorithm.hash : algorithm.hash.name;
      const blockBytes = /^SHA-(384|512)$/i.test(hash) ? 128 : 64;
      const length = algorithm.length ? Math.ceil(algorithm.length / 8) : blockBytes;
      return native.importKey('raw', crypto.getRandomValues(new Uint8Array(length)), algorithm, extractable, usages);
    }
    if (name.startsWith('AES-')) {
      if (![128, 192, 256].includes(algorithm.length)) {
        throw new DOMException('AES key length must be 128, 192 or 256 bits.', 'OperationError');
      }
      return native.importKey('raw', crypto.getRandomValues(new Uint8Array(algorithm.length / 8)), algorithm, extractable, usages);
    }
    if (native.generateKey) return native.generateKey(algorithm, extractable, usages);
    throw new DOMException(`Unrecognized or unimplemented algorithm "${name}" for generateKey.`, 'NotSupportedError');
  });
}
