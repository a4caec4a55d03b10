// Streams: TransformStream, generated ReadableStreams, TextEncoder/Decoder
// and their stream forms.
export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/streams/upper') {
      const upper = new TransformStream({
        transform(chunk, controller) {
          controller.enqueue(new TextEncoder().encode(new TextDecoder().decode(chunk).toUpperCase()));
        },
      });
      return new Response(request.body.pipeThrough(upper), { headers: { 'content-type': 'text/plain' } });
    }
    if (url.pathname === '/streams/generate') {
      let i = 0;
      const enc = new TextEncoder();
      const body = new ReadableStream({
        pull(controller) {
          if (i === 5) return controller.close();
          controller.enqueue(enc.encode(`line ${i++}\n`));
        },
      });
      return new Response(body, { headers: { 'content-type': 'text/plain' } });
    }
    if (url.pathname === '/streams/text-streams') {
      const body = request.body.pipeThrough(new TextDecoderStream()).pipeThrough(
        new TransformStream({ transform(s, c) { c.enqueue(`[${s.length}]`); } }),
      ).pipeThrough(new TextEncoderStream());
      return new Response(body);
    }
    if (url.pathname === '/streams/codec') {
      const enc = new TextEncoder();
      const bytes = enc.encode('héllo wörld €');
      const dec = new TextDecoder();
      const split = dec.decode(bytes.subarray(0, 2), { stream: true }) + dec.decode(bytes.subarray(2));
      let fatal;
      try { new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array([0xff])); fatal = 'no'; } catch (e) { fatal = e.name; }
      return Response.json({ length: bytes.length, first: [...bytes.subarray(0, 4)], split, replacement: new TextDecoder().decode(new Uint8Array([0x61, 0xff, 0x62])), fatal, into: enc.encodeInto('abc', new Uint8Array(2)) });
    }
    if (url.pathname === '/streams/tee') {
      const [a, b] = new Response('tee body').body.tee();
      const [ta, tb] = await Promise.all([new Response(a).text(), new Response(b).text()]);
      return new Response(`${ta}|${tb}`);
    }
    if (url.pathname === '/streams/identity') {
      const { readable, writable } = new IdentityTransformStream();
      const w = writable.getWriter();
      w.write(new TextEncoder().encode('through '));
      w.write(new TextEncoder().encode('identity'));
      w.close();
      return new Response(readable);
    }
    return new Response('not found', { status: 404 });
  },
};
