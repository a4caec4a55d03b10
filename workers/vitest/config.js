// vitest for Workers on edge: `defineEdgeConfig` takes the config a
// Worker's suite gives `defineWorkersConfig` (@cloudflare/vitest-pool-
// workers): `test.poolOptions.workers.wrangler.configPath` (or
// `poolOptions.edge`) names the Worker. Before the tests, the Worker is
// built and served by a local edge (`EDGE_BIN`, or `edge` above here or on
// PATH); `cloudflare:test` is this package's module, whose `SELF.fetch`
// sends requests to it.

import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export function defineEdgeConfig(config = {}) {
  const test = config.test || {};
  const pool = (test.poolOptions && (test.poolOptions.edge || test.poolOptions.workers)) || {};
  const wrangler = pool.wrangler && pool.wrangler.configPath;
  if (!wrangler) {
    throw new Error('defineEdgeConfig: test.poolOptions.workers.wrangler.configPath must name the Worker\'s wrangler.toml');
  }
  // The global setup runs in this process: it finds the Worker here.
  process.env.EDGE_VITEST_WRANGLER = resolve(wrangler);
  const { poolOptions, pool: _pool, ...rest } = test;
  return {
    ...config,
    resolve: {
      ...(config.resolve || {}),
      alias: {
        ...((config.resolve && config.resolve.alias) || {}),
        'cloudflare:test': join(here, 'test.js'),
        'cloudflare:workers': join(here, 'workers.js'),
      },
    },
    test: {
      ...rest,
      globalSetup: [join(here, 'setup.js'), ...[].concat(rest.globalSetup || [])],
    },
  };
}

export default defineEdgeConfig;
