// Errors: an exception or a rejected promise in fetch is a 500, unless
// passThroughOnException sends the request on to the origin.
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === '/errors/pass-through') {
      ctx.passThroughOnException();
      throw new Error('handled by the origin');
    }
    if (url.pathname === '/errors/throw') throw new Error('boom');
    if (url.pathname === '/errors/throw-string') throw 'a string';
    if (url.pathname === '/errors/reject') return Promise.reject(new TypeError('rejected'));
    if (url.pathname === '/errors/not-response') return 'not a response';
    if (url.pathname === '/errors/caught') {
      try {
        JSON.parse('{bad json');
      } catch (e) {
        return new Response(e.name, { status: 400 });
      }
    }
    return new Response('fine');
  },
};
