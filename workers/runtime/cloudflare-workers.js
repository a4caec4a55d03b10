// The `cloudflare:workers` module, as far as a stateless Worker uses it.
import { bindings } from './env.js';

/** Base class of class-syntax Workers (`export default class extends WorkerEntrypoint`). */
export class WorkerEntrypoint {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

/** `import { env } from 'cloudflare:workers'`: the bindings, outside a request too. */
export const env = new Proxy({}, {
  get: (_, name) => bindings()[name],
  has: (_, name) => name in bindings(),
  ownKeys: () => Reflect.ownKeys(bindings()),
  getOwnPropertyDescriptor: (_, name) => Reflect.getOwnPropertyDescriptor(bindings(), name),
});
