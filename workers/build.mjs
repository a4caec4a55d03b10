// Builds a module-syntax Worker for edge. By default a *script*: esbuild
// bundles the Worker alone, and the result (a component of custom sections
// only) runs on the Workers engine every host has once. With --snapshot,
// a component of its own: the Worker bundled behind edge's adapter and
// snapshotted into StarlingMonkey by componentize-js. --engine builds the
// engine itself (the runtime snapshotted without a Worker).
//
//   node workers/build.mjs [--config wrangler.toml] [--out worker.wasm] [--snapshot] [ENTRY]
//   node workers/build.mjs --engine --out engine.wasm
//
// Library: `build({ entry, out, snapshot, vars, secrets, kvNamespaces,
// services, compatibilityDate })`, `fromWrangler(path)` for those options,
// `buildEngine(out)`.

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

/** Rewrites that every bundle needs, and what the engine resolves. */
function commonModules(b) {
  // StarlingMonkey is built without ICU: regular expressions cannot use
  // Unicode property escapes. The URLPattern polyfill's two (which tell a
  // pattern's `:name` characters) become classes of ASCII letters, digits
  // and all non-ASCII characters.
  b.onLoad({ filter: /urlpattern-polyfill[\\/]dist[\\/]urlpattern\.js$/ }, async (args) => ({
    contents: (await readFile(args.path, 'utf8'))
      .replaceAll('\\p{ID_Start}', 'A-Za-z\\u00AA-\\u{10FFFF}')
      .replaceAll('\\p{ID_Continue}', '0-9A-Za-z\\u00AA-\\u{10FFFF}'),
    loader: 'js',
  }));
  // WIT interfaces are resolved by componentize-js.
  b.onResolve({ filter: /^(wasi|edge):[a-z-]+\// }, (args) => ({ path: args.path, external: true }));
}

/** A virtual module of `contents`. */
function virtual(b, filter, name, contents) {
  b.onResolve({ filter }, () => ({ path: name, namespace: 'edge' }));
  b.onLoad({ filter: new RegExp(`^${name}$`), namespace: 'edge' }, () => ({ contents, loader: 'js', resolveDir: here }));
}

/** The runtime (adapter, prelude, polyfills) with the Worker at `entry`
 * and its binding table built in: a snapshot of its own. */
function snapshotModules(entry, table) {
  return {
    name: 'edge-worker',
    setup(b) {
      b.onResolve({ filter: /^edge:worker-entry$/ }, () => ({ path: entry }));
      virtual(b, /^edge:worker-bindings$/, 'bindings', `export default ${JSON.stringify(table)};`);
      b.onResolve({ filter: /^cloudflare:workers$/ }, () => ({ path: join(runtime, 'cloudflare-workers.js') }));
      commonModules(b);
    },
  };
}

/** The runtime with no Worker: the Worker comes as a script at run time. */
const engineModules = {
  name: 'edge-engine',
  setup(b) {
    b.onResolve({ filter: /^edge:worker-entry$/ }, () => ({ path: join(runtime, 'script-entry.js') }));
    b.onResolve({ filter: /^edge:worker-bindings$/ }, () => ({ path: join(runtime, 'script-bindings.js') }));
    b.onResolve({ filter: /^cloudflare:workers$/ }, () => ({ path: join(runtime, 'cloudflare-workers.js') }));
    commonModules(b);
  },
};

/** The Worker at `entry` alone, for the engine (runtime/script.js). */
function scriptModules(entry, table) {
  return {
    name: 'edge-script',
    setup(b) {
      virtual(
        b,
        /^edge:script-main$/,
        'script-main',
        `import worker from ${JSON.stringify(entry)};\nexport default worker;\nexport const bindings = ${JSON.stringify(table)};\n`,
      );
      // The engine's own module, which the script must share (its `env`).
      virtual(
        b,
        /^cloudflare:workers$/,
        'cloudflare-workers',
        'const m = globalThis.__edgeCloudflareWorkers;\nexport const WorkerEntrypoint = m.WorkerEntrypoint;\nexport const env = m.env;\n',
      );
      commonModules(b);
    },
  };
}

const BUNDLE = {
  bundle: true,
  write: false,
  platform: 'neutral',
  target: 'es2022',
  conditions: ['workerd', 'worker', 'browser'],
  mainFields: ['module', 'main'],
  logLevel: 'silent',
  legalComments: 'none',
};

/** Bundles with esbuild; returns the bundle's text. Bundler errors are
 * `BuildError`s with FILE:LINE:COL. */
async function bundleWith(options) {
  let result;
  try {
    result = await bundle({ ...BUNDLE, ...options });
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

/** The Worker at `entry` behind the adapter: the source of a snapshot. */
export function bundleWorker(entry, table) {
  return bundleWith({
    entryPoints: [join(runtime, 'adapter.js')],
    format: 'esm',
    plugins: [snapshotModules(resolve(entry), table)],
  });
}

/** The Worker at `entry` as a script for the engine: an IIFE setting
 * `globalThis.__edgeWorker`, named worker.js in stacks. */
export async function bundleScript(entry, table) {
  const text = await bundleWith({
    entryPoints: ['edge:script-main'],
    format: 'iife',
    globalName: '__edgeWorker',
    plugins: [scriptModules(resolve(entry), table)],
  });
  return `${text}//# sourceURL=worker.js\n`;
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

/** The engine interface version a script is built for (the host refuses
 * a script of another). */
export const ENGINE_ABI = 1;

/** What the host reads from a Worker's `edge:worker` section; `engine`
 * (the ABI) marks a script for the Workers engine. */
export function workerSection(table, compatibilityDate, engine) {
  const section = {
    format: 1,
    compatibility_date: compatibilityDate || null,
    secrets: table.secrets.map((name) => name.toLowerCase()),
    kv_namespaces: Object.values(table.kv),
    services: Object.values(table.services),
  };
  if (engine) section.engine = engine;
  return section;
}

/** A component of nothing but custom sections: wasm's empty component. */
const EMPTY_COMPONENT = Uint8Array.from([0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]);

const json = (value) => new TextEncoder().encode(JSON.stringify(value));

/** Snapshots `source` (an ES module) into a component of `world`. */
async function snapshot(source, world) {
  const dir = await mkdtemp(join(tmpdir(), 'edge-worker-'));
  const cwd = process.cwd();
  try {
    const sourcePath = join(dir, 'worker.js');
    await writeFile(sourcePath, source);
    // componentize-js reads the WIT inside a WASI sandbox that sees the
    // working directory: run it from here, with a relative path.
    process.chdir(here);
    try {
      const { component } = await componentize({
        sourcePath,
        witPath: 'wit',
        worldName: world,
        disableFeatures: ['fetch-event'],
        // StarlingMonkey with its function names, for profiling.
        debugBuild: process.env.EDGE_WORKERS_DEBUG_BUILD === '1',
      });
      return component;
    } catch (e) {
      // The engine's message for a Worker that throws at top level names
      // the bundle's line; say which file it is.
      throw new BuildError(String(e.message || e).trim(), 'evaluating the Worker at build time');
    }
  } finally {
    process.chdir(cwd);
    await rm(dir, { recursive: true, force: true });
  }
}

/** Builds a Worker; returns the bytes (and writes them to `out` if given).
 * By default a script for the Workers engine: a component of two custom
 * sections, its declaration and its bundle, which every host's one engine
 * runs. With `snapshot`, a component of its own (engine and Worker,
 * snapshotted after its top level ran). */
export async function build(opts) {
  const table = bindingTable(opts);
  let bytes;
  if (opts.snapshot) {
    const component = await snapshot(await bundleWorker(opts.entry, table), 'worker');
    bytes = withCustomSection(component, 'edge:worker', json(workerSection(table, opts.compatibilityDate)));
  } else {
    const script = await bundleScript(opts.entry, table);
    bytes = withCustomSection(EMPTY_COMPONENT, 'edge:worker', json(workerSection(table, opts.compatibilityDate, ENGINE_ABI)));
    bytes = withCustomSection(bytes, 'edge:worker-script', new TextEncoder().encode(script));
  }
  if (opts.out) await writeFile(opts.out, bytes);
  return bytes;
}

/** Builds the Workers engine: the runtime snapshotted with no Worker,
 * marked with its ABI. */
export async function buildEngine(out) {
  const source = await bundleWith({
    entryPoints: [join(runtime, 'engine.js')],
    format: 'esm',
    plugins: [engineModules],
  });
  const component = await snapshot(source, 'engine');
  const bytes = withCustomSection(component, 'edge:worker-engine', json({ abi: ENGINE_ABI }));
  if (out) await writeFile(out, bytes);
  return bytes;
}

async function main(argv) {
  let config;
  let out = 'worker.wasm';
  let entry;
  let snapshot = false;
  let engine = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--config') config = argv[++i];
    else if (argv[i] === '--out') out = argv[++i];
    else if (argv[i] === '--snapshot') snapshot = true;
    else if (argv[i] === '--engine') engine = true;
    else if (argv[i].startsWith('--')) {
      throw new BuildError(`unknown option ${argv[i]} (allowed: --config FILE, --out FILE, --snapshot, --engine)`);
    } else entry = argv[i];
  }
  const started = Date.now();
  if (engine) {
    const bytes = await buildEngine(out);
    console.error(`built the Workers engine ${out} (${bytes.length} bytes) in ${Date.now() - started} ms`);
    return;
  }
  const opts = config ? await fromWrangler(config) : {};
  if (entry) opts.entry = resolve(entry);
  if (!opts.entry) throw new BuildError('no Worker given: ENTRY or --config wrangler.toml');
  const bytes = await build({ ...opts, out, snapshot });
  console.error(`built ${out} (${bytes.length} bytes) in ${Date.now() - started} ms`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(`edge worker build: ${e.message}`);
    process.exit(1);
  });
}
