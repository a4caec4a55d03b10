// As for @cloudflare/vitest-pool-workers, but for edge: only the import
// differs (defineWorkersConfig from '@cloudflare/vitest-pool-workers/config').
import { defineEdgeConfig as defineWorkersConfig } from '@edge/workers/vitest';

export default defineWorkersConfig({
  test: {
    poolOptions: {
      workers: {
        wrangler: { configPath: './wrangler.toml' },
      },
    },
  },
});
