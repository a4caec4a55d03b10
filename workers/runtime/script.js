// The Workers engine's side of a Worker script: one engine component (this
// runtime, snapshotted once) serves every Worker, and each Worker is only
// its bundle, which the host hands over (`edge:worker/script`) and which
// is evaluated here, once per instance, at its first request.
//
// The bundle (build.mjs, script mode) is an IIFE that sets
// `globalThis.__edgeWorker = { default, bindings }`: the Worker's default
// export and its binding table. Its `cloudflare:workers` imports read the
// module below from `globalThis.__edgeCloudflareWorkers`.

import { source } from 'edge:worker/script@0.1.0';
import { atTopLevel } from './prelude.js';
import * as cloudflareWorkers from './cloudflare-workers.js';

let loaded;
let failure;

/** The Worker's module: its bundle evaluated under workerd's global-scope
 * rules. A top level that throws fails every request with the same error. */
export function load() {
  if (loaded) return loaded;
  if (failure) throw failure;
  try {
    globalThis.__edgeCloudflareWorkers = cloudflareWorkers;
    const text = source();
    atTopLevel(() => (0, eval)(text));
    loaded = globalThis.__edgeWorker;
    delete globalThis.__edgeWorker;
    if (!loaded || typeof loaded !== 'object') {
      throw new TypeError('the Worker script did not define its module (build it with edge\'s workers/build.mjs)');
    }
    return loaded;
  } catch (e) {
    failure = e;
    throw e;
  }
}

/** What a deploy checks before a Worker goes live: its top level, run.
 * Empty if it ran, else the error with its stack. */
export function check() {
  try {
    load();
    return '';
  } catch (e) {
    const stack = e && e.stack ? `\n${e.stack}` : '';
    return `${e}${stack}`;
  }
}
