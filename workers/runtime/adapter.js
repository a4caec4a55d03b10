// The component's `wasi:http/incoming-handler`: turns each incoming request
// into a `Request`, calls the Worker's `fetch(request, env, ctx)` and
// streams its `Response` back.
//
// It is written against the raw wasi:http resources rather than
// StarlingMonkey's built-in fetch event because that event is a one-shot
// singleton (StarlingMonkey#247): an instance could serve one request only,
// and a fresh instance per request costs ~6x workerd's time. Exporting the
// handler ourselves lets the host keep an instance warm across requests,
// which is also what a Workers isolate does (globals persist between
// requests).

import { IncomingBody, OutgoingBody, ResponseOutparam } from 'wasi:http/types@0.2.10';
import { requestHead, responseHead } from 'edge:worker/exchange@0.1.0';
import { markServing } from './prelude.js';
import worker from 'edge:worker-entry';
import { bindings } from './env.js';
import { ExecutionContext, settleWaitUntil } from './context.js';
import { cfOf, originOf } from './cf.js';
import { UNCAUGHT_HEADER } from './fetcher.js';
import { staticBody } from './static-body.js';

// Bytes asked of the request body per read.
const READ_BYTES = 65536n;

const encoder = new TextEncoder();

// Response headers a wasi:http host refuses (hop-by-hop): workerd drops
// them too.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** The `Request` a Worker sees for a wasi:http incoming request (its head
 * read in one host call: host/edge/src/exchange.rs). */
function toRequest(incoming) {
  const [method, scheme, authority, path, pairs] = JSON.parse(requestHead(incoming));
  const headers = new Headers(pairs);
  const host = authority || headers.get('host') || 'localhost';
  const protocol = scheme === 'https' ? 'https' : 'http';
  const url = `${protocol}://${host}${path || '/'}`;
  const init = { method, headers };
  if (method !== 'GET' && method !== 'HEAD') {
    init.body = bodyStream(incoming.consume());
    init.duplex = 'half';
  }
  const request = new Request(url, init);
  Object.defineProperty(request, 'cf', { value: cfOf(), enumerable: false });
  return request;
}

/** A `ReadableStream` over a request body, read as the Worker pulls. */
function bodyStream(body) {
  const stream = body.stream();
  const ready = stream.subscribe();
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    ready[Symbol.dispose]();
    stream[Symbol.dispose]();
    IncomingBody.finish(body);
  };
  return new ReadableStream({
    type: 'bytes',
    pull(controller) {
      for (;;) {
        let chunk;
        try {
          chunk = stream.read(READ_BYTES);
        } catch (e) {
          finish();
          if (e && e.payload && e.payload.tag === 'closed') {
            controller.close();
            return;
          }
          controller.error(new TypeError('reading the request body failed'));
          return;
        }
        if (chunk.length > 0) {
          controller.enqueue(chunk);
          return;
        }
        ready.block();
      }
    },
    cancel: finish,
  });
}

/** Writes all of `bytes` to an output stream, waiting for room. */
function writeAll(out, ready, bytes) {
  let at = 0;
  while (at < bytes.length) {
    let room = Number(out.checkWrite());
    if (room === 0) {
      ready.block();
      continue;
    }
    const n = Math.min(room, bytes.length - at);
    out.write(bytes.subarray(at, at + n));
    at += n;
  }
}

/**
 * The wasi:http response for `response`'s status and headers in one host
 * call: complete if `body` (bytes) is given, else with its outgoing body
 * to stream into. Throws (before anything is sent) on what wasi:http
 * refuses.
 */
function head(response, body) {
  const fields = [];
  for (const [name, value] of response.headers) {
    if (!HOP_BY_HOP.has(name)) fields.push([name, value]);
  }
  return responseHead(response.status, JSON.stringify(fields), body);
}

// The most a blocking write-and-flush may take at once (wasi:io).
const BLOCKING_WRITE_BYTES = 4096;

/** Streams `response`'s body into `body` (an outgoing body), then
 * finishes it. A small chunk goes in one call. */
async function stream(response, body) {
  const out = body.write();
  let ready;
  let unflushed = false;
  try {
    if (response.body) {
      const reader = response.body.getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const bytes = typeof value === 'string' ? encoder.encode(value) : toBytes(value);
        if (bytes.length === 0) continue;
        if (bytes.length <= BLOCKING_WRITE_BYTES) {
          out.blockingWriteAndFlush(bytes);
          continue;
        }
        ready = ready || out.subscribe();
        writeAll(out, ready, bytes);
        out.flush();
        unflushed = true;
      }
    }
    if (unflushed) out.blockingFlush();
  } finally {
    if (ready) ready[Symbol.dispose]();
    out[Symbol.dispose]();
  }
  OutgoingBody.finish(body, undefined);
}

function toBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  throw new TypeError('a response body chunk must be an ArrayBuffer or ArrayBufferView');
}

/** workerd's answer when the Worker fails: a bare status and its words. */
function failureResponse(error) {
  // The exception goes along in a header, so that a Worker calling this
  // one through a service binding throws it as workerd does
  // (runtime/fetcher.js); the host drops the header from what clients get.
  const name = error instanceof Error ? error.name : 'Error';
  const message = error instanceof Error ? error.message : String(error);
  const headers = { [UNCAUGHT_HEADER]: encodeURIComponent(`${name}\n${message}`) };
  return new Response(encoder.encode('Internal Server Error'), { status: 500, headers });
}

/** Why a Worker failed, with its stack, for the log (stderr). A failed
 * wasi call says why in its payload. */
function logFailure(what, error) {
  const payload = error && error.payload ? ` (${JSON.stringify(error.payload)})` : '';
  const stack = error && error.stack ? `\n${error.stack}` : '';
  console.error(`${what}: ${error}${payload}${stack}`);
}

/** Whether a wasi stream failed because the client went away. */
function clientGone(error) {
  return Boolean(error && error.payload && error.payload.tag === 'closed');
}

export const incomingHandler = {
  async handle(incoming, outparam) {
    markServing();
    try {
      await serve(incoming, outparam);
    } finally {
      // Resources are dropped now rather than when the GC finalizes their
      // wrappers: a warm instance serves many requests, and the host caps
      // the resources one instance may hold.
      incoming[Symbol.dispose]();
    }
  },
};

async function serve(incoming, outparam) {
  const ctx = new ExecutionContext();
  let request;
  let response;
  try {
    request = toRequest(incoming);
    if (!worker || typeof worker.fetch !== 'function') {
      throw new TypeError('the Worker has no default export with a fetch handler');
    }
    response = await worker.fetch(request, bindings(), ctx);
    if (!(response instanceof Response)) {
      throw new TypeError('the fetch handler did not return a Response');
    }
  } catch (error) {
    logFailure('uncaught exception in fetch', error);
    response = ctx.passedThrough && request ? await passThrough(request) : null;
    response = response || failureResponse(error);
  }
  let outgoing;
  let body;
  try {
    [outgoing, body] = head(response, staticBody(response));
  } catch (error) {
    logFailure('the response cannot be sent', error);
    response = failureResponse(error);
    [outgoing, body] = head(response, staticBody(response));
  }
  ResponseOutparam.set(outparam, { tag: 'ok', val: outgoing });
  if (body) {
    try {
      await stream(response, body);
    } catch (error) {
      // The status line went out; the client sees a cut body (or has left).
      if (!clientGone(error)) logFailure('streaming the response failed', error);
    }
  }
  if (ctx.hasPending) await settleWaitUntil(ctx);
}

/**
 * `ctx.passThroughOnException()`: the request goes on to the origin of the
 * site the Worker serves on its host (a Worker on a plain route has none,
 * and answers 500).
 */
async function passThrough(request) {
  const url = new URL(request.url);
  const origin = originOf(url.hostname);
  if (!origin) {
    console.error(`passThroughOnException: no site with an origin serves ${url.hostname} through this Worker; answering 500`);
    return null;
  }
  try {
    return await fetch(new Request(`${origin}${url.pathname}${url.search}`, request));
  } catch (error) {
    logFailure('passing the request through to the origin failed', error);
    return null;
  }
}
