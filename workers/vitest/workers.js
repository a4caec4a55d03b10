// `cloudflare:workers` for a Worker's module imported into a test (unit
// style): the same names, with the suite's bindings as `env`.
import { inject } from 'vitest';

export class WorkerEntrypoint {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}

export const env = inject('edgeEnv');
