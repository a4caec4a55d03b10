// A link shortener: POST /links { "url": ... } stores a link in KV and
// answers its id; GET /:id redirects to it; DELETE /:id needs the admin
// token (a secret). GET / greets.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === '/') {
      return new Response(`Hello from ${env.SITE_NAME}!`);
    }
    if (url.pathname === '/links' && request.method === 'POST') {
      let body;
      try {
        body = await request.json();
      } catch {
        return Response.json({ error: 'the body is not JSON' }, { status: 400 });
      }
      let target;
      try {
        target = new URL(body.url);
      } catch {
        return Response.json({ error: 'url is not a URL' }, { status: 400 });
      }
      const id = crypto.randomUUID().slice(0, 8);
      await env.LINKS.put(id, target.href, { metadata: { created: Date.now() } });
      return Response.json({ id, url: target.href }, { status: 201 });
    }
    const id = url.pathname.slice(1);
    if (request.method === 'DELETE') {
      if (request.headers.get('authorization') !== `Bearer ${env.ADMIN_TOKEN}`) {
        return new Response('forbidden', { status: 403 });
      }
      await env.LINKS.delete(id);
      return new Response(null, { status: 204 });
    }
    const target = await env.LINKS.get(id);
    return target ? Response.redirect(target, 302) : new Response('no such link', { status: 404 });
  },
};
