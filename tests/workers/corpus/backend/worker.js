// The other end of the `services` Worker's binding: no route of its own.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (request.headers.get('x-chunks')) {
      const n = Number(request.headers.get('x-chunks'));
      let i = 0;
      const body = new ReadableStream({
        pull(controller) {
          if (i === n) return controller.close();
          controller.enqueue(new TextEncoder().encode(`chunk ${i++}\n`));
        },
      });
      return new Response(body, { headers: { 'content-type': 'text/plain' } });
    }
    switch (url.pathname) {
      case '/backend/status':
        return new Response('made up', { status: 418, headers: { 'x-backend': 'yes' } });
      case '/backend/throw':
        throw new Error('backend failed');
      default: {
        const body = await request.text();
        return Response.json(
          { method: request.method, url: request.url, body, test: request.headers.get('x-test'), marked: request.headers.has('edge-service') },
          { status: 201, headers: { 'x-backend': 'yes' } },
        );
      }
    }
  },
};
