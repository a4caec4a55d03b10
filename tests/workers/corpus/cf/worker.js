// request.cf as the PoP knows it.
export default {
  async fetch(request) {
    return Response.json({ colo: request.cf?.colo ?? null, country: request.cf?.country ?? null });
  },
};
