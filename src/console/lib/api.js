// The public API client: every call carries the signed-in key in the Authorization header (never a
// cookie or a URL), and every error is the API's envelope turned into an ApiError.

const KEY_STORAGE = "portico.console.key";

export class ApiError extends Error {
  constructor(status, message, metadata) {
    super(message);
    this.status = status;
    this.metadata = metadata ?? {};
  }
}

/** The signed-in key lives in this tab's sessionStorage only: gone when the tab closes. */
export const session = {
  key() {
    return sessionStorage.getItem(KEY_STORAGE);
  },
  signIn(key) {
    sessionStorage.setItem(KEY_STORAGE, key);
  },
  /** Forgets the key and everything else the console kept in this tab (pending questions). */
  signOut() {
    for (const name of Object.keys(sessionStorage)) if (name.startsWith("portico.console.")) sessionStorage.removeItem(name);
  },
};

/** Reads the envelope {error: {code, message, metadata}} of a failed response. */
export async function errorOf(res) {
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const err = body && typeof body === "object" ? body.error : undefined;
  const message = err && typeof err.message === "string" ? err.message : `Request failed with status ${res.status}`;
  return new ApiError(res.status, message, err?.metadata);
}

/** An error for a form's error line: the API's message, with the offending field when it names one. */
export function messageOf(e) {
  return e?.metadata?.field ? `${e.message} (${e.metadata.field})` : (e?.message ?? String(e));
}

export function requestInit(method, key, body, signal) {
  const headers = { authorization: `Bearer ${key}`, accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  return {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
    signal,
  };
}

/** Calls /api/v1<path> with the given key (default: the signed-in one) and returns the parsed JSON. */
export async function api(method, path, body, key = session.key()) {
  if (!key) throw new ApiError(401, "Not signed in");
  const res = await fetch(`/api/v1${path}`, requestInit(method, key, body));
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && key === session.key()) window.dispatchEvent(new CustomEvent("portico:signed-out", { detail: err.message }));
    throw err;
  }
  return res.json();
}

/** Fetches every page of a list endpoint by the one paging rule (limit, starting_after, has_more, next_cursor). */
export async function listAll(path) {
  const out = [];
  const sep = path.includes("?") ? "&" : "?";
  let cursor;
  for (;;) {
    const q = new URLSearchParams({ limit: "100" });
    if (cursor) q.set("starting_after", cursor);
    const page = await api("GET", `${path}${sep}${q}`);
    out.push(...page.data);
    if (!page.has_more || !page.next_cursor) return out;
    cursor = page.next_cursor;
  }
}

/** The same walk (kept for the pages that name it). */
export const listAllByCursor = listAll;

/** A path segment, percent-encoded. */
export const seg = (s) => encodeURIComponent(s);
