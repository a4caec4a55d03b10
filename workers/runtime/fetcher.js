// Service bindings: `env.NAME.fetch(...)` calls another app of the tenant.
// The request goes out through wasi:http like any fetch, marked with the
// `edge-service` header naming the app; the host takes the mark off and
// serves the request in process, through that app's routes, if this
// Worker's build declared the binding (host/edge/src/services.rs). The
// request's URL is the caller's, as on Cloudflare: the called app sees it
// unchanged.

const SERVICE_HEADER = 'edge-service';

/** Marks the 500 of a Worker whose handler threw: `NAME\nMESSAGE`, URI-encoded
 * (runtime/adapter.js). The host drops it from what clients get. */
export const UNCAUGHT_HEADER = 'edge-uncaught';

const ERRORS = { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };

export class Fetcher {
  #app;

  constructor(app) {
    this.#app = app;
  }

  /** As the global `fetch`, but answered by the bound app. */
  async fetch(input, init) {
    const request = new Request(input, init);
    const headers = new Headers(request.headers);
    headers.set(SERVICE_HEADER, this.#app);
    const response = await fetch(new Request(request, { headers }));
    // The called Worker threw: so does this call, as on workerd.
    const uncaught = response.headers.get(UNCAUGHT_HEADER);
    if (uncaught !== null) {
      const [name, ...message] = decodeURIComponent(uncaught).split('\n');
      throw new (ERRORS[name] || Error)(message.join('\n'));
    }
    return response;
  }

  /** Sockets to a bound app are not supported. */
  connect() {
    throw new Error('connect() on a service binding is not supported on edge');
  }
}
