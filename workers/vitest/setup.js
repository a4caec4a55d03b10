// The global setup: builds the Worker, serves it on a local edge for the
// run, and gives the tests its address and bindings.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseToml } from 'smol-toml';
import { build, fromWrangler } from '../build.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** `edge`: EDGE_BIN, else the build's, else PATH. */
function edgeBin() {
  if (process.env.EDGE_BIN) return process.env.EDGE_BIN;
  const targets = [process.env.CARGO_TARGET_DIR, join(process.env.HOME || '', '.cache/edge/target'), join(here, '../../target')];
  for (const t of targets.filter(Boolean)) {
    const bin = join(t, 'release/edge');
    if (existsSync(bin)) return bin;
  }
  return 'edge';
}

/** `.dev.vars` beside wrangler.toml (Cloudflare's place for local secrets). */
function devVars(dir) {
  const file = join(dir, '.dev.vars');
  if (!existsSync(file)) return {};
  const out = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (m) out[m[1]] = m[2].replace(/^"(.*)"$/, '$1');
  }
  return out;
}

export default async function setup(project) {
  const wrangler = process.env.EDGE_VITEST_WRANGLER;
  const opts = await fromWrangler(wrangler);
  const secrets = devVars(dirname(wrangler));
  const dir = mkdtempSync(join(tmpdir(), 'edge-vitest-'));
  await build({ ...opts, out: join(dir, 'worker.wasm') });
  const stores = Object.keys(opts.kvNamespaces).map((b) => JSON.stringify(b.toLowerCase()));
  const variables = opts.secrets
    .map((s) => `${s.toLowerCase()} = { default = ${JSON.stringify(secrets[s] ?? '')}, secret = true }`)
    .join('\n');
  const componentVariables = opts.secrets.map((s) => `${s.toLowerCase()} = "{{ ${s.toLowerCase()} }}"`).join('\n');
  writeFileSync(
    join(dir, 'spin.toml'),
    `spin_manifest_version = 2
[application]
name = "vitest"
[variables]
${variables}
[[trigger.http]]
route = "/..."
component = "worker"
[component.worker]
source = "worker.wasm"
key_value_stores = [${stores.join(', ')}]
allowed_outbound_hosts = ["https://*:*", "http://*:*"]
[component.worker.variables]
${componentVariables}
`,
  );
  writeFileSync(
    join(dir, 'edge.toml'),
    `app = "spin.toml"
[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
data_dir = "data"
[[tenant]]
name = "vitest"
hosts = ["*"]
components = ["*"]
`,
  );
  const edge = spawn(edgeBin(), ['serve', '--config', join(dir, 'edge.toml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  edge.stderr.on('data', (d) => {
    log += d;
  });
  const url = await new Promise((ok, fail) => {
    let out = '';
    edge.stdout.on('data', (d) => {
      out += d;
      const m = /edge listening on (http:\/\/\S+)/.exec(out);
      if (m) ok(m[1]);
    });
    edge.on('exit', (code) => fail(new Error(`edge exited (${code}) before listening:\n${log}`)));
    edge.on('error', fail);
  });
  project.provide('edgeUrl', url);
  project.provide('edgeEnv', { ...opts.vars, ...Object.fromEntries(opts.secrets.map((s) => [s, secrets[s] ?? ''])) });
  return async () => {
    edge.kill('SIGTERM');
    await new Promise((ok) => edge.once('exit', ok));
    rmSync(dir, { recursive: true, force: true });
  };
}
