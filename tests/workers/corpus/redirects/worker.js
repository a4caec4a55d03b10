// Redirects: Response.redirect and a hand-made Location.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/redirects/permanent') return Response.redirect('https://example.com/moved', 301);
    if (url.pathname === '/redirects/default') return Response.redirect(new URL('/redirects/target?x=1', request.url).href);
    if (url.pathname === '/redirects/manual') return new Response(null, { status: 307, headers: { location: '/redirects/target' } });
    if (url.pathname === '/redirects/invalid') {
      try {
        Response.redirect('https://example.com/', 200);
        return new Response('accepted');
      } catch (e) {
        return new Response(e.name, { status: 400 });
      }
    }
    return new Response('target ' + url.search);
  },
};
