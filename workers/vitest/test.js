// `cloudflare:test` for suites run against edge: `SELF.fetch` reaches the
// Worker the global setup serves; `env` holds its vars and secrets (KV
// namespaces live in edge, reached through the Worker);
// `createExecutionContext` and `waitOnExecutionContext` serve unit-style
// tests that call the Worker's `fetch` in the test process.

import { inject } from 'vitest';

const base = inject('edgeUrl');

export const env = inject('edgeEnv');

export const SELF = {
  /** Sends the request to the Worker on edge; the Worker sees its URL's
   * host (as Host) and path. */
  async fetch(input, init) {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const headers = new Headers(request.headers);
    headers.set('host', url.host);
    const body = request.body ? await request.arrayBuffer() : undefined;
    return fetch(`${base}${url.pathname}${url.search}`, {
      method: request.method,
      headers,
      body,
      redirect: 'manual',
    });
  },
};

export function createExecutionContext() {
  const promises = [];
  return {
    waitUntil(promise) {
      promises.push(Promise.resolve(promise));
    },
    passThroughOnException() {},
    props: {},
    [Symbol.for('edge.waitUntil')]: promises,
  };
}

export async function waitOnExecutionContext(ctx) {
  const promises = ctx[Symbol.for('edge.waitUntil')] || [];
  while (promises.length > 0) {
    await Promise.allSettled(promises.splice(0));
  }
}
