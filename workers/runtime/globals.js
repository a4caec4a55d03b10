// Globals Workers have and StarlingMonkey lacks, each defined only where
// the engine has none.

import { URLPattern } from 'urlpattern-polyfill/urlpattern';
import './subtle.js';
import './static-body.js';
import { HTMLRewriter } from './html-rewriter.js';

function define(name, value) {
  if (!(name in globalThis)) {
    Object.defineProperty(globalThis, name, { value, writable: true, configurable: true });
  }
}

define('URLPattern', URLPattern);
define('HTMLRewriter', HTMLRewriter);

// workerd's values.
define('navigator', Object.freeze({ userAgent: 'Cloudflare-Workers', hardwareConcurrency: 1, language: 'en' }));

/** Strings in, UTF-8 bytes out. */
class TextEncoderStream extends TransformStream {
  constructor() {
    const encoder = new TextEncoder();
    super({
      transform(chunk, controller) {
        const bytes = encoder.encode(String(chunk));
        if (bytes.length > 0) controller.enqueue(bytes);
      },
    });
  }

  get encoding() {
    return 'utf-8';
  }
}
define('TextEncoderStream', TextEncoderStream);

/** Bytes in, strings out; a character split across chunks is kept whole. */
class TextDecoderStream extends TransformStream {
  #decoder;

  constructor(label = 'utf-8', options = {}) {
    const decoder = new TextDecoder(label, options);
    super({
      transform(chunk, controller) {
        const text = decoder.decode(chunk, { stream: true });
        if (text) controller.enqueue(text);
      },
      flush(controller) {
        const text = decoder.decode();
        if (text) controller.enqueue(text);
      },
    });
    this.#decoder = decoder;
  }

  get encoding() {
    return this.#decoder.encoding;
  }

  get fatal() {
    return this.#decoder.fatal;
  }

  get ignoreBOM() {
    return this.#decoder.ignoreBOM;
  }
}
define('TextDecoderStream', TextDecoderStream);

function bytesOf(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new TypeError('This TransformStream is being used as a byte stream, but received an object of non-ArrayBuffer/ArrayBufferView type on its writable side.');
}

/** workerd's byte pass-through stream. */
class IdentityTransformStream extends TransformStream {
  constructor() {
    super({
      transform(chunk, controller) {
        controller.enqueue(bytesOf(chunk));
      },
    });
  }
}
define('IdentityTransformStream', IdentityTransformStream);

/** A byte pass-through stream that must carry exactly `length` bytes. */
class FixedLengthStream extends TransformStream {
  constructor(length) {
    const expected = Number(length);
    if (!Number.isSafeInteger(expected) || expected < 0) {
      throw new TypeError('FixedLengthStream requires a non-negative integer length.');
    }
    let seen = 0;
    super({
      transform(chunk, controller) {
        const bytes = bytesOf(chunk);
        seen += bytes.length;
        if (seen > expected) {
          controller.error(new TypeError('Attempt to write too many bytes through a FixedLengthStream.'));
          return;
        }
        controller.enqueue(bytes);
      },
      flush(controller) {
        if (seen < expected) {
          controller.error(new TypeError('FixedLengthStream did not see all expected bytes before close().'));
        }
      },
    });
  }
}
define('FixedLengthStream', FixedLengthStream);

define('reportError', (error) => {
  console.error(`reportError: ${error}${error && error.stack ? `\n${error.stack}` : ''}`);
});

define('scheduler', Object.freeze({
  wait: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(ms) || 0))),
}));

// `Response#clone` (and `Request#clone`), where the engine lacks them: the
// body is teed, the clone gets one branch and the original reads the other
// (its body and body-reading methods are redefined on the instance).
function cloneBody(original, make) {
  const body = original.body;
  if (body === null) return make(null);
  const [mine, theirs] = body.tee();
  const reread = new Response(mine);
  for (const method of ['arrayBuffer', 'text', 'json', 'blob', 'formData', 'bytes']) {
    if (typeof reread[method] === 'function') {
      Object.defineProperty(original, method, { value: () => reread[method](), configurable: true });
    }
  }
  Object.defineProperty(original, 'body', { get: () => reread.body, configurable: true });
  Object.defineProperty(original, 'bodyUsed', { get: () => reread.bodyUsed, configurable: true });
  return make(theirs);
}

if (typeof Response.prototype.clone !== 'function') {
  Object.defineProperty(Response.prototype, 'clone', {
    value: function clone() {
      if (this.bodyUsed) throw new TypeError('Body has already been used. It can only be used once. Use tee() first if you need to read it twice.');
      return cloneBody(this, (body) => new Response(body, { status: this.status, statusText: this.statusText, headers: new Headers(this.headers) }));
    },
    writable: true,
    configurable: true,
  });
}

if (typeof Request.prototype.clone !== 'function') {
  Object.defineProperty(Request.prototype, 'clone', {
    value: function clone() {
      if (this.bodyUsed) throw new TypeError('Body has already been used. It can only be used once. Use tee() first if you need to read it twice.');
      return cloneBody(this, (body) => new Request(this.url, { method: this.method, headers: new Headers(this.headers), body, redirect: this.redirect }));
    },
    writable: true,
    configurable: true,
  });
}
