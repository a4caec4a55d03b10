// The reference edge's Workers are compared with: workerd, through
// miniflare (which adds what workerd alone lacks for a test: KV namespaces
// kept in memory, service bindings between Workers of one run).
//
//   node workers/reference.mjs CONFIG.json
//
// CONFIG: { "port": N, "workers": [{ "name", "script", "compatibilityDate",
// "bindings": { NAME: value }, "kv": [BINDING], "services": { BINDING:
// WORKER } }] }. Every Worker answers under /NAME/... on the one port, as
// edge routes them: a router Worker in front passes each request,
// unchanged, to the Worker its first path segment names; the router's
// socket is workerd's own (miniflare's dev-mode error pages are not what
// production answers). Prints "ready" once listening; stops on SIGTERM or
// when stdin closes.

import { Miniflare } from 'miniflare';
import { readFile } from 'node:fs/promises';

const config = JSON.parse(await readFile(process.argv[2], 'utf8'));

const ROUTER = `export default {
  fetch(request, env) {
    const name = new URL(request.url).pathname.split('/')[1];
    const target = env['w_' + name];
    return target ? target.fetch(request) : new Response('no such Worker: ' + name, { status: 404 });
  },
};`;

const workers = [
  {
    name: 'router',
    modules: true,
    script: ROUTER,
    compatibilityDate: '2024-09-23',
    serviceBindings: Object.fromEntries(config.workers.map((w) => [`w_${w.name}`, w.name])),
    // Straight to workerd, past miniflare's entry Worker (whose dev-mode
    // error pages are not what production answers).
    unsafeDirectSockets: [{ host: '127.0.0.1', port: config.port }],
  },
  ...config.workers.map((w) => ({
    name: w.name,
    modules: true,
    scriptPath: w.script,
    compatibilityDate: w.compatibilityDate || '2024-09-23',
    bindings: w.bindings || {},
    kvNamespaces: w.kv || [],
    serviceBindings: w.services || {},
  })),
];

const mf = new Miniflare({ host: '127.0.0.1', port: 0, workers });
await mf.ready;
console.log('ready');

const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
