// The one way the browser talks to a server: JSON in and out, the CSRF
// token on every change, and every failure as an ApiError carrying the
// server's own words (`{"error": {"field", "message"}}`).

/** A refused or failed request, as the server explained it. */
export class ApiError extends Error {
  constructor(
    /** HTTP status; 0 when the server was not reached. */
    readonly status: number,
    message: string,
    /** The request field it is about (`rules[2].pattern`), if any. */
    readonly field: string | null = null,
    /** The whole error answer (a 409 may carry the current state). */
    readonly body: unknown = null,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** Reads the server's error body, or makes one from the status. */
export function errorFrom(status: number, text: string): ApiError {
  try {
    const body = JSON.parse(text) as { error?: { field?: unknown; message?: unknown } };
    const e = body?.error;
    if (e && typeof e.message === "string") {
      return new ApiError(status, e.message, typeof e.field === "string" ? e.field : null, body);
    }
  } catch {
    // Not JSON: a proxy's page, an empty body.
  }
  const snippet = text.trim().slice(0, 200);
  return new ApiError(status, snippet ? `HTTP ${status}: ${snippet}` : `HTTP ${status}`);
}

/** Where requests go and how they are authorised. */
export interface Transport {
  /** The CSRF token of the session, sent on every change. */
  csrf: string | null;
  /** Called when the server says the session is over (401). */
  onUnauthorized?: () => void;
}

export const transport: Transport = { csrf: null };

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** Sends a request; its JSON answer (null for 204). */
export async function request<T>(
  method: string,
  path: string,
  body?: unknown,
  init: { contentType?: string; signal?: AbortSignal } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  let payload: BodyInit | undefined;
  if (body !== undefined) {
    if (init.contentType) {
      headers["content-type"] = init.contentType;
      payload = body as BodyInit;
    } else {
      headers["content-type"] = "application/json";
      payload = JSON.stringify(body);
    }
  }
  if (!SAFE.has(method) && transport.csrf) headers["x-csrf-token"] = transport.csrf;
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: payload,
      credentials: "same-origin",
      signal: init.signal,
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(0, `the server could not be reached (${String(e)})`);
  }
  const text = await response.text();
  if (!response.ok) {
    if (response.status === 401) transport.onUnauthorized?.();
    throw errorFrom(response.status, text);
  }
  return (text ? JSON.parse(text) : null) as T;
}

export const get = <T>(path: string, signal?: AbortSignal) =>
  request<T>("GET", path, undefined, { signal });
export const post = <T>(path: string, body?: unknown) => request<T>("POST", path, body ?? {});
export const put = <T>(path: string, body: unknown) => request<T>("PUT", path, body);
export const patch = <T>(path: string, body: unknown) => request<T>("PATCH", path, body);
export const del = <T>(path: string) => request<T>("DELETE", path);

/**
 * Uploads `body` with progress (fetch cannot report an upload's progress;
 * XMLHttpRequest can). `onProgress` gets the fraction sent, 0 to 1.
 */
export function upload<T>(
  path: string,
  body: Blob,
  contentType: string,
  onProgress: (fraction: number) => void,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    xhr.setRequestHeader("content-type", contentType);
    xhr.setRequestHeader("accept", "application/json");
    if (transport.csrf) xhr.setRequestHeader("x-csrf-token", transport.csrf);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0) onProgress(e.loaded / e.total);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(1);
        resolve((xhr.responseText ? JSON.parse(xhr.responseText) : null) as T);
      } else {
        if (xhr.status === 401) transport.onUnauthorized?.();
        reject(errorFrom(xhr.status, xhr.responseText));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, "the upload was cut off before the server answered"));
    xhr.send(body);
  });
}
