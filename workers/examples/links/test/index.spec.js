import { env, createExecutionContext, waitOnExecutionContext, SELF } from 'cloudflare:test';
import { describe, it, expect } from 'vitest';
import worker from '../src/index.js';

describe('links worker', () => {
  it('greets (unit style)', async () => {
    const request = new Request('http://example.com/');
    const ctx = createExecutionContext();
    const response = await worker.fetch(request, env, ctx);
    await waitOnExecutionContext(ctx);
    expect(await response.text()).toBe('Hello from Links!');
  });

  it('greets (integration style)', async () => {
    const response = await SELF.fetch('https://example.com/');
    expect(await response.text()).toBe('Hello from Links!');
  });

  it('shortens a link and redirects to it', async () => {
    const created = await SELF.fetch('https://example.com/links', {
      method: 'POST',
      body: JSON.stringify({ url: 'https://developers.cloudflare.com/workers/' }),
    });
    expect(created.status).toBe(201);
    const { id } = await created.json();
    expect(id).toMatch(/^[0-9a-f]{8}$/);
    const followed = await SELF.fetch(`https://example.com/${id}`);
    expect(followed.status).toBe(302);
    expect(followed.headers.get('location')).toBe('https://developers.cloudflare.com/workers/');
  });

  it('refuses what is not a link', async () => {
    const response = await SELF.fetch('https://example.com/links', { method: 'POST', body: '{"url": "nope"}' });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: 'url is not a URL' });
  });

  it('deletes only with the admin token', async () => {
    const created = await SELF.fetch('https://example.com/links', { method: 'POST', body: '{"url": "https://example.org/"}' });
    const { id } = await created.json();
    const refused = await SELF.fetch(`https://example.com/${id}`, { method: 'DELETE' });
    expect(refused.status).toBe(403);
    const deleted = await SELF.fetch(`https://example.com/${id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
    });
    expect(deleted.status).toBe(204);
    expect((await SELF.fetch(`https://example.com/${id}`)).status).toBe(404);
  });
});
