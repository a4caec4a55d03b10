// Request and response basics: method, URL, headers, bodies, statuses.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    switch (url.pathname) {
      case '/basics/echo': {
        const headers = {};
        for (const [k, v] of request.headers) if (k.startsWith('x-')) headers[k] = v;
        const body = await request.text();
        return Response.json({ method: request.method, path: url.pathname, search: url.search, headers, body, length: body.length });
      }
      case '/basics/status':
        return new Response('teapot\n', { status: 418, statusText: 'I am a teapot', headers: { 'content-type': 'text/plain' } });
      case '/basics/no-content':
        return new Response(null, { status: 204 });
      case '/basics/cookies': {
        const h = new Headers();
        h.append('set-cookie', 'a=1; Path=/');
        h.append('set-cookie', 'b=2; HttpOnly');
        h.set('x-count', String(h.getSetCookie().length));
        return new Response('cookies\n', { headers: h });
      }
      case '/basics/headers': {
        const h = new Headers({ 'X-Mixed-Case': 'one' });
        h.append('x-multi', 'a');
        h.append('x-multi', 'b');
        h.delete('x-nothing');
        return Response.json({ mixed: h.get('x-mixed-case'), multi: h.get('x-multi'), has: h.has('X-MULTI'), keys: [...h.keys()] }, { headers: h });
      }
      case '/basics/json': {
        const input = await request.json();
        return Response.json({ sum: input.numbers.reduce((a, b) => a + b, 0), echo: input }, { status: 201 });
      }
      case '/basics/bytes': {
        const buf = await request.arrayBuffer();
        const bytes = new Uint8Array(buf);
        let sum = 0;
        for (const b of bytes) sum = (sum + b) % 65536;
        return new Response(new Uint8Array([bytes.length & 255, sum & 255, sum >> 8]), { headers: { 'content-type': 'application/octet-stream' } });
      }
      case '/basics/clone': {
        const r = new Response('twice');
        const c = r.clone();
        return new Response((await r.text()) + ' ' + (await c.text()));
      }
      case '/basics/form': {
        const form = await request.formData();
        return Response.json(Object.fromEntries(form));
      }
      case '/basics/bytes-mutated': {
        // The body is the bytes as they were when the Response was made.
        const bytes = new TextEncoder().encode('abc');
        const r = new Response(bytes);
        bytes[0] = 120;
        return r;
      }
      case '/basics/length':
        return new Response('twelve bytes', { headers: { 'content-length': '12' } });
      case '/basics/json-init': {
        // An explicit content type and status; `toJSON` runs once.
        let calls = 0;
        const data = { toJSON: () => ({ calls: ++calls }) };
        return Response.json(data, { status: 202, statusText: 'Accepted', headers: { 'content-type': 'application/vnd.api+json', 'x-one': '1' } });
      }
      case '/basics/json-undefined':
        return Response.json(undefined);
      case '/basics/empty':
        return new Response();
      case '/basics/buffer':
        return new Response(new Uint16Array([0x6968, 0x2121]).buffer);
      default:
        return new Response('not found\n', { status: 404 });
    }
  },
};
