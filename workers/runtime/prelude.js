// What runs before the Worker's own top-level code: the global scope rules
// of workerd, and the globals Workers have that StarlingMonkey lacks.
//
// The Worker's top level runs once, at build time, inside the snapshot
// (wizer). Nothing from that moment may leak into requests: no random seed
// (the snapshot would give every instance the same one) and no clock. So,
// as on workerd, generating random values, timers and I/O at top level
// throw; `Date.now()` there is 0; `Math.random()` works (workerd allows it)
// from a generator used only until the first request, after which the
// engine's own, seeded from wasi:random at first use, takes over.

import './globals.js';

let serving = false;

/** Called by the adapter when the first request arrives. */
export function markServing() {
  serving = true;
}

/** Runs `f` under the global-scope rules: how the Workers engine evaluates
 * a Worker's script, at its first request rather than in a snapshot. */
export function atTopLevel(f) {
  const was = serving;
  serving = false;
  try {
    return f();
  } finally {
    serving = was;
  }
}

const DISALLOWED =
  'Disallowed operation called within global scope. Asynchronous I/O (ex: fetch() or connect()), setting a timeout, and generating random values are not allowed within global scope. To fix this error, perform this operation within a handler. https://developers.cloudflare.com/workers/runtime-apis/handlers/';

function guard(owner, name) {
  const real = owner[name];
  if (typeof real !== 'function') return;
  Object.defineProperty(owner, name, {
    value: function (...args) {
      if (!serving) throw new Error(DISALLOWED);
      return real.apply(this, args);
    },
    writable: true,
    configurable: true,
  });
}

guard(globalThis.crypto, 'getRandomValues');
guard(globalThis.crypto, 'randomUUID');
guard(globalThis, 'fetch');
guard(globalThis, 'setTimeout');
guard(globalThis, 'setInterval');

// Top-level Math.random: xorshift128+ from a fixed seed (its values are the
// same in every instance of a build, as a snapshot's must be).
{
  const real = Math.random;
  let s0 = 0x9e3779b9;
  let s1 = 0x243f6a88;
  const early = () => {
    let x = s0;
    const y = s1;
    s0 = y;
    x ^= x << 23;
    x ^= x >>> 17;
    x ^= y ^ (y >>> 26);
    s1 = x;
    return ((s0 + s1) >>> 0) / 4294967296;
  };
  Math.random = function random() {
    return serving ? real() : early();
  };
}

{
  const realNow = Date.now;
  Date.now = function now() {
    return serving ? realNow() : 0;
  };
}
