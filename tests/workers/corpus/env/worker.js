// Bindings: plain and JSON vars, a secret; `import { env }` from
// cloudflare:workers sees the same.
import { env as moduleEnv } from 'cloudflare:workers';

export default {
  async fetch(request, env) {
    return Response.json({
      greeting: env.GREETING,
      config: env.CONFIG,
      nested: env.CONFIG.limits.max,
      secret: env.API_KEY,
      missing: env.NOPE === undefined,
      same: moduleEnv.GREETING === env.GREETING,
    });
  },
};
