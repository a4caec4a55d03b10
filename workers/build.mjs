// Builds a module-syntax Worker into a wasi:http component that edge serves:
// esbuild bundles the Worker behind edge's adapter (runtime/adapter.js) and
// prelude, then componentize-js snapshots it into StarlingMonkey.
//
//   node workers/build.mjs [--config wrangler.toml] [--out worker.wasm] [ENTRY]
//
// Library: `build({ entry, out, vars, secrets, kvNamespaces, services,
// compatibilityDate })`, or `fromWrangler(path)` for those options.

import { build as bundle } from 'esbuild';
import { componentize } from '@bytecodealliance/componentize-js';
import { parse as parseToml } from 'smol-toml';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const runtime = join(here, 'runtime');

/** Binding names a Worker may use: identifiers, unique once lower-cased
 * (secrets are read from variables named in lower case). */
const BINDING_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A build error with the place it points to. */
export class BuildError extends Error {
  constructor(message, location) {
    super(location ? `${location}: ${message}` : message);
    this.name = 'BuildError';
    this.location = location;
  }
}

/** The build options a `wrangler.toml` gives (main, vars, kv_namespaces,
 * services, compatibility_date), paths resolved against its directory. */
export async function fromWrangler(path) {
  const text = await readFile(path, 'utf8');
  let config;
  try {
    config = parseToml(text);
  } catch (e) {
    throw new BuildError(e.message.split('\n')[0], `${path}:${e.line ?? 1}:${e.column ?? 1}`);
  }
  if (typeof config.main !== 'string') {
    throw new BuildError('`main` (the Worker\'s entry module) is required', path);
  }
  const kvNamespaces = {};
  for (const [i, ns] of (config.kv_namespaces || []).entries()) {
    if (!ns || typeof ns.binding !== 'string') {
      throw new BuildError('every kv_namespaces entry needs a `binding`', `${path}: kv_namespaces[${i}]`);
    }
    // The store a namespace lives in is named after its binding (its
    // Cloudflare id means nothing here): CACHE → key-value store "cache".
    kvNamespaces[ns.binding] = ns.binding.toLowerCase();
  }
  const services = {};
  for (const [i, s] of (config.services || []).entries()) {
    if (!s || typeof s.binding !== 'string' || typeof s.service !== 'string') {
      throw new BuildError('every services entry needs a `binding` and a `service`', `${path}: services[${i}]`);
    }
    services[s.binding] = s.service;
  }
  const secrets = config.secrets && Array.isArray(config.secrets.required) ? config.secrets.required : [];
  return {
    name: config.name,
    entry: resolve(dirname(path), config.main),
    vars: config.vars || {},
    secrets,
    kvNamespaces,
    services,
    compatibilityDate: config.compatibility_date,
  };
}

/** Checks binding names; returns the table the adapter's `env` is built from. */
export function bindingTable({ vars = {}, secrets = [], kvNamespaces = {}, services = {} }) {
  const seen = new Map();
  const claim = (name, kind) => {
    if (!BINDING_NAME.test(name)) {
      throw new BuildError(`binding name ${JSON.stringify(name)} is not allowed: letters, digits and _, not starting with a digit`, kind);
    }
    const lower = name.toLowerCase();
    if (seen.has(lower)) {
      throw new BuildError(`binding ${name} clashes with ${seen.get(lower)} (names are compared without case)`, kind);
    }
    seen.set(lower, name);
  };
  for (const name of Object.keys(vars)) claim(name, 'vars');
  for (const name of secrets) claim(name, 'secrets');
  for (const name of Object.keys(kvNamespaces)) claim(name, 'kv_namespaces');
  for (const name of Object.keys(services)) claim(name, 'services');
  return { vars, secrets, kv: kvNamespaces, services };
}

/** The esbuild plugin that resolves the adapter's virtual modules. */
function workerModules(entry, table) {
  return {
    name: 'edge-worker',
    setup(b) {
      b.onResolve({ filter: /^edge:worker-entry$/ }, () => ({ path: entry }));
      b.onResolve({ filter: /^edge:worker-bindings$/ }, () => ({ path: 'bindings', namespace: 'edge' }));
      b.onLoad({ filter: /^bindings$/, namespace: 'edge' }, () => ({
        contents: `export default ${JSON.stringify(table)};`,
        loader: 'js',
      }));
      b.onResolve({ filter: /^cloudflare:workers$/ }, () => ({ path: join(runtime, 'cloudflare-workers.js') }));
      // StarlingMonkey is built without ICU: regular expressions cannot use
      // Unicode property escapes. The URLPattern polyfill's two (which
      // tell a pattern's `:name` characters) become classes of ASCII
      // letters, digits and all non-ASCII characters.
      b.onLoad({ filter: /urlpattern-polyfill[\\/]dist[\\/]urlpattern\.js$/ }, async (args) => ({
        contents: (await readFile(args.path, 'utf8'))
          .replaceAll('\\p{ID_Start}', 'A-Za-z\\u00AA-\\u{10FFFF}')
          .replaceAll('\\p{ID_Continue}', '0-9A-Za-z\\u00AA-\\u{10FFFF}'),
        loader: 'js',
      }));
      // WIT interfaces are resolved by componentize-js.
      b.onResolve({ filter: /^(wasi|edge):[a-z-]+\// }, (args) => ({ path: args.path, external: true }));
    },
  };
}

/** Bundles the Worker at `entry` behind the adapter; returns the bundle's
 * text. Bundler errors are `BuildError`s with FILE:LINE:COL. */
export async function bundleWorker(entry, table) {
  let result;
  try {
    result = await bundle({
      entryPoints: [join(runtime, 'adapter.js')],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      conditions: ['workerd', 'worker', 'browser'],
      mainFields: ['module', 'main'],
      plugins: [workerModules(resolve(entry), table)],
      logLevel: 'silent',
      legalComments: 'none',
    });
  } catch (e) {
    const first = e.errors && e.errors[0];
    if (first) {
      const loc = first.location;
      throw new BuildError(first.text, loc ? `${loc.file}:${loc.line}:${loc.column + 1}` : undefined);
    }
    throw e;
  }
  return result.outputFiles[0].text;
}

/** Appends a custom section to a component's bytes. */
function withCustomSection(bytes, name, payload) {
  const leb = (n) => {
    const out = [];
    do {
      let b = n & 0x7f;
      n >>>= 7;
      if (n) b |= 0x80;
      out.push(b);
    } while (n);
    return out;
  };
  const nameBytes = new TextEncoder().encode(name);
  const body = [...leb(nameBytes.length), ...nameBytes, ...payload];
  return Buffer.concat([Buffer.from(bytes), Buffer.from([0, ...leb(body.length)]), Buffer.from(body)]);
}

/** What the host reads from a Worker component's `edge:worker` section. */
export function workerSection(table, compatibilityDate) {
  return {
    format: 1,
    compatibility_date: compatibilityDate || null,
    secrets: table.secrets.map((name) => name.toLowerCase()),
    kv_namespaces: Object.values(table.kv),
    services: Object.values(table.services),
  };
}

/** Builds the Worker into a component; returns its bytes (and writes them
 * to `out` if given). */
export async function build(opts) {
  const table = bindingTable(opts);
  const source = await bundleWorker(opts.entry, table);
  const dir = await mkdtemp(join(tmpdir(), 'edge-worker-'));
  try {
    const sourcePath = join(dir, 'worker.js');
    await writeFile(sourcePath, source);
    let component;
    // componentize-js reads the WIT inside a WASI sandbox that sees the
    // working directory: run it from here, with a relative path.
    const cwd = process.cwd();
    process.chdir(here);
    try {
      ({ component } = await componentize({
        sourcePath,
        witPath: 'wit',
        worldName: 'worker',
        disableFeatures: ['fetch-event'],
      }));
    } catch (e) {
      // The engine's message for a Worker that throws at top level names
      // the bundle's line; say which file it is.
      throw new BuildError(String(e.message || e).trim(), 'evaluating the Worker at build time');
    } finally {
      process.chdir(cwd);
    }
    const section = new TextEncoder().encode(JSON.stringify(workerSection(table, opts.compatibilityDate)));
    const bytes = withCustomSection(component, 'edge:worker', section);
    if (opts.out) await writeFile(opts.out, bytes);
    return bytes;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function main(argv) {
  let config;
  let out = 'worker.wasm';
  let entry;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--config') config = argv[++i];
    else if (argv[i] === '--out') out = argv[++i];
    else if (argv[i].startsWith('--')) throw new BuildError(`unknown option ${argv[i]} (allowed: --config FILE, --out FILE)`);
    else entry = argv[i];
  }
  const opts = config ? await fromWrangler(config) : {};
  if (entry) opts.entry = resolve(entry);
  if (!opts.entry) throw new BuildError('no Worker given: ENTRY or --config wrangler.toml');
  const started = Date.now();
  const bytes = await build({ ...opts, out });
  console.error(`built ${out} (${bytes.length} bytes) in ${Date.now() - started} ms`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(`edge worker build: ${e.message}`);
    process.exit(1);
  });
}
