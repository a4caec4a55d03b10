// Service bindings: requests to other Workers of the same account (on
// edge, other apps of the same tenant), in process.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    switch (url.pathname) {
      case '/services/echo': {
        // A new request to another Worker's route.
        const r = await env.BASICS.fetch('https://internal.example/basics/echo?via=binding', {
          method: 'POST',
          headers: { 'x-from': 'services' },
          body: 'hello over a binding',
        });
        return new Response(`${r.status} ${r.headers.get('content-type')}\n${await r.text()}`);
      }
      case '/services/forward':
        // The client's request itself, body and all, answered as is.
        return env.BACKEND.fetch(request);
      case '/services/stream':
        return env.BACKEND.fetch(new Request(url, { headers: { 'x-chunks': '5' } }));
      case '/services/status': {
        const r = await env.BACKEND.fetch('https://internal.example/backend/status');
        return Response.json({ status: r.status, text: await r.text(), header: r.headers.get('x-backend') });
      }
      case '/services/throws': {
        const r = await env.BACKEND.fetch('https://internal.example/backend/throw');
        return Response.json({ status: r.status, text: await r.text() });
      }
      case '/services/throws-caught':
        try {
          await env.BACKEND.fetch('https://internal.example/backend/throw');
          return new Response('no exception');
        } catch (e) {
          return new Response(`${e.constructor.name}: ${e.message}`);
        }
      case '/services/depth': {
        // Calls itself until `n` reaches `to`.
        const n = Number(url.searchParams.get('n') || 0);
        const to = Number(url.searchParams.get('to') || 3);
        if (n >= to) return new Response(`bottom at ${n}`);
        const next = new URL(url);
        next.searchParams.set('n', String(n + 1));
        const r = await env.SELF.fetch(next);
        return new Response(`${n} > ${await r.text()}`);
      }
      case '/services/recurse': {
        // Calls itself forever: the platform's depth limit ends it.
        const n = Number(url.searchParams.get('n') || 0);
        const next = new URL(url);
        next.searchParams.set('n', String(n + 1));
        try {
          const r = await env.SELF.fetch(next);
          return new Response(await r.text(), { status: r.status });
        } catch (e) {
          return new Response(`refused at ${n}: ${e.message}`, { status: 508 });
        }
      }
      case '/services/forged':
        // The mark the binding puts on a request, put on a plain fetch.
        try {
          const r = await fetch('http://127.0.0.1:9/forged', { headers: { 'edge-service': url.searchParams.get('app') } });
          return new Response(`${r.status} ${await r.text()}`);
        } catch (e) {
          return new Response(`refused: ${e.message}`, { status: 502 });
        }
      case '/services/kinds':
        return Response.json({
          type: typeof env.BACKEND.fetch,
          missing: typeof env.NOPE,
        });
      default:
        return new Response('not found\n', { status: 404 });
    }
  },
};
