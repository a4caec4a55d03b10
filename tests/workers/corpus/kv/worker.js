// KV namespaces: text/json/arrayBuffer/stream reads, metadata, expiration,
// delete, list with prefix and cursors, and the errors Cloudflare gives.
// Keys are prefixed with the request's `run`, so runs do not see each
// other's keys.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const kv = env.CACHE;
    const p = `${url.searchParams.get('run')}/`;
    const now = () => Math.floor(Date.now() / 1000);
    if (url.pathname === '/kv/scenario') {
      await kv.put(p + 'text', 'hello');
      await kv.put(p + 'json', JSON.stringify({ a: 1 }), { metadata: { kind: 'json', n: 2 } });
      await kv.put(p + 'bytes', new Uint8Array([1, 2, 3]));
      await kv.put(p + 'ttl', 'short', { expirationTtl: 3600 });
      await kv.put(p + 'at', 'absolute', { expiration: now() + 7200, metadata: 'plain' });
      const out = {};
      out.text = await kv.get(p + 'text');
      out.textType = await kv.get(p + 'text', 'text');
      out.json = await kv.get(p + 'json', { type: 'json' });
      out.bytes = [...new Uint8Array(await kv.get(p + 'bytes', 'arrayBuffer'))];
      out.stream = await new Response(await kv.get(p + 'text', 'stream')).text();
      const withMeta = await kv.getWithMetadata(p + 'json', 'json');
      out.withMeta = { value: withMeta.value, metadata: withMeta.metadata };
      out.noMeta = (await kv.getWithMetadata(p + 'text')).metadata;
      out.missing = await kv.get(p + 'nope');
      const missing = await kv.getWithMetadata(p + 'nope');
      out.missingMeta = { value: missing.value, metadata: missing.metadata };
      await kv.delete(p + 'bytes');
      await kv.delete(p + 'never-there');
      out.deleted = await kv.get(p + 'bytes');
      const list = await kv.list({ prefix: p });
      out.list = list.keys.map((k) => ({
        name: k.name.slice(p.length),
        metadata: k.metadata ?? null,
        expiresIn: k.expiration ? Math.round((k.expiration - now()) / 600) * 600 : null,
      }));
      out.complete = list.list_complete;
      out.cursor = typeof list.cursor;
      return Response.json(out);
    }
    if (url.pathname === '/kv/paging') {
      for (const name of ['b', 'a', 'é', 'c/1', 'c/0', 'Z', 'ab']) await kv.put(`${p}page/${name}`, name);
      await kv.put(`${p}other`, 'not listed');
      const pages = [];
      let cursor;
      do {
        const r = await kv.list({ prefix: p + 'page/', limit: 3, cursor });
        pages.push({ keys: r.keys.map((k) => k.name.slice(p.length + 5)), complete: r.list_complete, cursor: typeof r.cursor });
        cursor = r.list_complete ? undefined : r.cursor;
      } while (cursor);
      return Response.json(pages);
    }
    if (url.pathname === '/kv/errors') {
      const out = {};
      const attempt = async (name, f) => {
        try {
          await f();
          out[name] = 'ok';
        } catch (e) {
          out[name] = `${e.name}: ${e.message}`;
        }
      };
      await attempt('ttl-too-short', () => kv.put(p + 'x', 'v', { expirationTtl: 10 }));
      await attempt('ttl-not-a-number', () => kv.put(p + 'x', 'v', { expirationTtl: 'soon' }));
      await attempt('expiration-past', () => kv.put(p + 'x', 'v', { expiration: 1000 }));
      await attempt('empty-key', () => kv.put('', 'v'));
      await attempt('long-key', () => kv.put('k'.repeat(513), 'v'));
      await attempt('dot-key', () => kv.get('.'));
      await attempt('bad-type', () => kv.get(p + 'x', 'xml'));
      await attempt('bad-limit', () => kv.list({ limit: 0 }));
      await attempt('big-metadata', () => kv.put(p + 'x', 'v', { metadata: { blob: 'm'.repeat(1100) } }));
      await attempt('bad-value', () => kv.put(p + 'x', 42));
      await attempt('unbound', () => env.NOPE.get('x'));
      out.unbound = out.unbound.split(':')[0];
      return Response.json(out);
    }
    return new Response('not found', { status: 404 });
  },
};
