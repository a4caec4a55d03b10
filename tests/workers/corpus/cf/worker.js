// request.cf as the PoP knows it, and the client's address as Cloudflare
// gives it.
export default {
  async fetch(request) {
    if (new URL(request.url).pathname === '/cf/client') {
      const spin = [...request.headers.keys()].filter((k) => k.startsWith('spin-'));
      return Response.json({ ip: request.headers.get('cf-connecting-ip'), spin });
    }
    return Response.json({ colo: request.cf?.colo ?? null, country: request.cf?.country ?? null });
  },
};
