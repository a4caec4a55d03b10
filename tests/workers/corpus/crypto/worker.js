// crypto.subtle digest, HMAC and ECDSA; crypto.randomUUID and
// getRandomValues. Signatures by ECDSA differ each time, so the Worker
// reports what verifies rather than the bytes.
const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, '0')).join('');
const enc = new TextEncoder();

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === '/crypto/digest') {
      const data = enc.encode(await request.text());
      const out = {};
      for (const alg of ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512']) out[alg] = hex(await crypto.subtle.digest(alg, data));
      return Response.json(out);
    }
    if (url.pathname === '/crypto/hmac') {
      const key = await crypto.subtle.importKey('raw', enc.encode('secret key'), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
      const sig = await crypto.subtle.sign('HMAC', key, enc.encode('message'));
      const ok = await crypto.subtle.verify('HMAC', key, sig, enc.encode('message'));
      const bad = await crypto.subtle.verify('HMAC', key, sig, enc.encode('messagE'));
      return Response.json({ sig: hex(sig), ok, bad });
    }
    if (url.pathname === '/crypto/ecdsa') {
      const pair = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
      const alg = { name: 'ECDSA', hash: 'SHA-256' };
      const sig = await crypto.subtle.sign(alg, pair.privateKey, enc.encode('payload'));
      const ok = await crypto.subtle.verify(alg, pair.publicKey, sig, enc.encode('payload'));
      const bad = await crypto.subtle.verify(alg, pair.publicKey, sig, enc.encode('payloaD'));
      const jwk = await crypto.subtle.exportKey('jwk', pair.publicKey);
      return Response.json({ sigBytes: sig.byteLength, ok, bad, kty: jwk.kty, crv: jwk.crv, xLen: jwk.x.length });
    }
    if (url.pathname === '/crypto/ecdsa-import') {
      // A fixed P-256 key pair (a test key, made for this file) as JWK:
      // a signature made with it verifies with its public half.
      const d = 'dRuXR6s0DxPn6Ht7WuJpS6sNhVWwA7VriKmDo7d8jcE';
      const x = 'C3lByePy25ERKzuR1xs1ur3C7eoRevYIcUc9Zjn99bg';
      const y = '16B7dyOXs2I8OThWc5vNbNIRTYWqLtzw3_Vweivk8QE';
      const priv = await crypto.subtle.importKey('jwk', { kty: 'EC', crv: 'P-256', d, x, y, ext: true }, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
      const pub = await crypto.subtle.importKey('jwk', { kty: 'EC', crv: 'P-256', x, y, ext: true }, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify']);
      const alg = { name: 'ECDSA', hash: 'SHA-256' };
      const sig = await crypto.subtle.sign(alg, priv, enc.encode('sample'));
      return Response.json({ ok: await crypto.subtle.verify(alg, pub, sig, enc.encode('sample')) });
    }
    if (url.pathname === '/crypto/random') {
      const uuid = crypto.randomUUID();
      const bytes = crypto.getRandomValues(new Uint8Array(16));
      let quota;
      try { crypto.getRandomValues(new Uint8Array(65537)); quota = 'none'; } catch (e) { quota = e.name; }
      return Response.json({
        uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(uuid),
        distinct: uuid !== crypto.randomUUID(),
        bytes: bytes.length,
        quota,
        math: Math.random() !== Math.random(),
      });
    }
    return new Response('not found', { status: 404 });
  },
};
