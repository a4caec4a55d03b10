// Responses made from a string, from bytes or with no body (and by
// `Response.json`) remember it, so
// that the adapter sends such a body with its head in one host call
// (`edge:worker/exchange`) instead of streaming it through wasi:io: most
// Workers answer that way, and each call through componentize-js'
// bindings costs microseconds. `Response` stays the engine's class (a
// Proxy only watches construction): `instanceof`, statics and subclasses
// behave as before.

const bodies = new WeakMap();
const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);

// Bytes are copied (the Worker may change its buffer after); past this
// size a body is streamed as before.
const COPY_LIMIT = 1 << 20;

function remember(response, body) {
  if (body === undefined || body === null) {
    bodies.set(response, EMPTY);
  } else if (typeof body === 'string') {
    bodies.set(response, body);
  } else if (ArrayBuffer.isView(body) && body.byteLength <= COPY_LIMIT) {
    bodies.set(response, new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice());
  } else if (body instanceof ArrayBuffer && body.byteLength <= COPY_LIMIT) {
    bodies.set(response, new Uint8Array(body.slice(0)));
  }
}

const NativeResponse = globalThis.Response;

/** `Response.json(data, init)` as the Fetch standard defines it (the data
 * serialized once, `content-type: application/json` unless `init` gives
 * one), made through the constructor so that its body is remembered. */
function json(data, init) {
  // What JSON cannot represent (undefined, a function) is the text
  // "undefined", as on workerd; what it cannot serialize throws.
  const text = String(JSON.stringify(data));
  const headers = new Headers(init ? init.headers : undefined);
  if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  return new globalThis.Response(text, {
    status: init ? init.status : undefined,
    statusText: init ? init.statusText : undefined,
    headers,
  });
}

globalThis.Response = new Proxy(NativeResponse, {
  construct(target, args, newTarget) {
    const response = Reflect.construct(target, args, newTarget);
    remember(response, args[0]);
    return response;
  },
  get(target, name, receiver) {
    return name === 'json' ? json : Reflect.get(target, name, receiver);
  },
});

/** The whole body of `response` as bytes, if it was made from a string
 * or bytes and not read since; else undefined (stream it). */
export function staticBody(response) {
  if (response.bodyUsed) return undefined;
  const body = bodies.get(response);
  return typeof body === 'string' ? encoder.encode(body) : body;
}
