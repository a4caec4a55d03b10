// `ctx`, the Worker's execution context: `waitUntil` work runs on after the
// response is sent, within a bounded time; `passThroughOnException` sends
// the request on to the origin if `fetch` throws.

/** How long `waitUntil` work may run after the response (workerd: 30 s;
 * the host's request deadline bounds it too). */
export const WAIT_UNTIL_MS = 5000;

export class ExecutionContext {
  #pending = [];
  #passThrough = false;

  waitUntil(promise) {
    if (!(promise instanceof Promise)) promise = Promise.resolve(promise);
    this.#pending.push(promise);
  }

  passThroughOnException() {
    this.#passThrough = true;
  }

  get hasPending() {
    return this.#pending.length > 0;
  }

  get passedThrough() {
    return this.#passThrough;
  }

  /** The promises given to `waitUntil`, including those added while
   * waiting for earlier ones. */
  takePending() {
    const taken = this.#pending;
    this.#pending = [];
    return taken;
  }

  // Durable Objects' `ctx` members, absent here as in a stateless Worker.
  get props() {
    return {};
  }
}

/** Waits for `ctx`'s `waitUntil` work, at most `WAIT_UNTIL_MS`; logs the
 * work cut off and each rejection. */
export async function settleWaitUntil(ctx, limitMs = WAIT_UNTIL_MS) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const pending = ctx.takePending();
    if (pending.length === 0) return;
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now()));
    });
    const settled = Promise.allSettled(pending).then((results) => {
      for (const r of results) {
        if (r.status === 'rejected') {
          const e = r.reason;
          console.error(`uncaught exception in waitUntil: ${e}${e && e.stack ? `\n${e.stack}` : ''}`);
        }
      }
      return 'done';
    });
    const outcome = await Promise.race([settled, timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      console.error(`waitUntil work still running ${limitMs} ms after the response was cancelled (${pending.length} promise(s))`);
      return;
    }
  }
}
