// URL and search parameters, URLPattern.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/url/parse') {
      const u = new URL('../b/c?x=1&y=2&x=3#frag', 'https://user:pw@Example.COM:8443/a/d/');
      return Response.json({ href: u.href, origin: u.origin, host: u.host, hostname: u.hostname, port: u.port, pathname: u.pathname, search: u.search, hash: u.hash, username: u.username, all: u.searchParams.getAll('x') });
    }
    if (url.pathname === '/url/params') {
      const p = url.searchParams;
      p.append('added', 'yes & no');
      p.sort();
      const out = new URLSearchParams({ a: '1', b: 'two words' });
      out.set('a', 'é');
      return Response.json({ got: Object.fromEntries(url.searchParams), string: p.toString(), out: out.toString(), size: [...p].length });
    }
    if (url.pathname.startsWith('/url/pattern/')) {
      const pattern = new URLPattern({ pathname: '/url/pattern/:kind/:id(\\d+)' });
      const m = pattern.exec(request.url);
      return Response.json({ test: pattern.test(request.url), groups: m ? m.pathname.groups : null });
    }
    if (url.pathname === '/url/invalid') {
      try {
        new URL('not a url');
        return new Response('parsed');
      } catch (e) {
        return new Response(`${e.name}`, { status: 400 });
      }
    }
    return new Response('not found', { status: 404 });
  },
};
