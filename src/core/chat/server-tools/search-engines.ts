/**
 * Search engines behind the web_search server tool (docs/plugins.md): one interface, a self-hosted SearXNG
 * (`GET <base>/search?q=…&format=json`) and the Brave Search API (`GET <base>/res/v1/web/search?q=…&count=…`
 * with `X-Subscription-Token`). Base URLs and the key come from configuration (src/config.ts). These are
 * operator-configured addresses (a SearXNG is often on a private network), so they use a plain HTTP client,
 * not the guarded one of web_fetch (which is for URLs a model or a caller supplies). The key never appears
 * in an error.
 */
import { undici } from "./guarded-fetch.js";
import type { ServerToolsConfig } from "../../../config.js";

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

export interface SearchQuery {
  query: string;
  count: number;
  signal: AbortSignal;
  /** Where the searcher is (the web plugin's `user_location`); only engines with {@link SearchEngine.takesLocation}. */
  location?: SearchLocation;
}

export interface SearchLocation {
  city?: string;
  country?: string;
  region?: string;
  timezone?: string;
}

export interface SearchEngine {
  readonly name: "searxng" | "brave";
  /** Whether the engine takes a searcher's location (Brave: `country` and its `X-Loc-*` headers; SearXNG: no). */
  readonly takesLocation: boolean;
  search(q: SearchQuery): Promise<SearchResult[]>;
}

/** A search that failed; its message is safe to show. */
export class SearchFailed extends Error {}

async function getJson(url: URL, headers: Record<string, string>, timeoutMs: number, signal: AbortSignal, engine: string): Promise<{ status: number; json: unknown }> {
  const both = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  const { request } = await undici();
  try {
    const res = await request(url, { method: "GET", headers: { accept: "application/json", ...headers }, signal: both });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, json };
  } catch (err) {
    if (signal.aborted) throw err;
    throw new SearchFailed(`the ${engine} search engine did not answer${both.aborted ? ` within ${timeoutMs} ms` : ""}`);
  }
}

const str = (v: unknown) => (typeof v === "string" ? v : "");

export function searxngEngine(baseUrl: string, timeoutMs: number): SearchEngine {
  return {
    name: "searxng",
    takesLocation: false,
    async search({ query, count, signal }) {
      const url = new URL(`${baseUrl}/search`);
      url.searchParams.set("q", query);
      url.searchParams.set("format", "json");
      const { status, json } = await getJson(url, {}, timeoutMs, signal, "SearXNG");
      if (status === 403) throw new SearXNGJsonOff();
      if (status !== 200 || !json || typeof json !== "object") throw new SearchFailed(`the SearXNG search engine answered ${status}`);
      const results = Array.isArray((json as { results?: unknown }).results) ? ((json as { results: unknown[] }).results) : [];
      return results.slice(0, count).map((r) => {
        const o = (r ?? {}) as Record<string, unknown>;
        return { title: str(o.title), url: str(o.url), snippet: str(o.content) };
      }).filter((r) => r.url !== "");
    },
  };
}

/** SearXNG answers 403 to `format=json` unless its settings list `json` in `search.formats`. */
class SearXNGJsonOff extends SearchFailed {
  constructor() {
    super("the SearXNG search engine refused format=json (403): its operator must list json in search.formats of settings.yml");
  }
}

export function braveEngine(baseUrl: string, apiKey: string, timeoutMs: number): SearchEngine {
  return {
    name: "brave",
    takesLocation: true,
    async search({ query, count, signal, location }) {
      const url = new URL(`${baseUrl}/res/v1/web/search`);
      url.searchParams.set("q", query);
      url.searchParams.set("count", String(Math.min(20, Math.max(1, count))));
      const headers: Record<string, string> = { "x-subscription-token": apiKey };
      if (location?.country) {
        url.searchParams.set("country", location.country.toUpperCase());
        headers["x-loc-country"] = location.country.toUpperCase();
      }
      if (location?.city) headers["x-loc-city"] = location.city;
      if (location?.region) headers["x-loc-state-name"] = location.region;
      if (location?.timezone) headers["x-loc-timezone"] = location.timezone;
      const { status, json } = await getJson(url, headers, timeoutMs, signal, "Brave");
      if (status === 401 || status === 403) throw new SearchFailed(`the Brave Search API refused the configured key (${status})`);
      if (status === 429) throw new SearchFailed("the Brave Search API rate-limited the search (429)");
      if (status !== 200 || !json || typeof json !== "object") throw new SearchFailed(`the Brave Search API answered ${status}`);
      const web = (json as { web?: { results?: unknown } }).web;
      const results = Array.isArray(web?.results) ? (web!.results as unknown[]) : [];
      return results.slice(0, count).map((r) => {
        const o = (r ?? {}) as Record<string, unknown>;
        return { title: str(o.title), url: str(o.url), snippet: str(o.description) };
      }).filter((r) => r.url !== "");
    },
  };
}

/** The engine of that name when it is configured, else the reason it is not (for the web plugin's `engine`). */
export function namedEngine(cfg: ServerToolsConfig["search"], name: "searxng" | "brave"): SearchEngine | { missing: string } {
  if (name === "searxng") return cfg.searxngUrl ? searxngEngine(cfg.searxngUrl, cfg.timeoutMs) : { missing: "the searxng engine is not configured on this server (PORTICO_SEARXNG_URL is not set)" };
  return cfg.braveApiKey ? braveEngine(cfg.braveUrl, cfg.braveApiKey, cfg.timeoutMs) : { missing: "the brave engine is not configured on this server (PORTICO_BRAVE_SEARCH_API_KEY is not set)" };
}

/** The configured engine, or undefined with the reason when none is configured. */
export function configuredEngine(cfg: ServerToolsConfig["search"]): SearchEngine | { missing: string } {
  const wanted = cfg.engine ?? (cfg.searxngUrl ? "searxng" : cfg.braveApiKey ? "brave" : undefined);
  if (wanted === "searxng") {
    return cfg.searxngUrl ? searxngEngine(cfg.searxngUrl, cfg.timeoutMs) : { missing: "PORTICO_WEB_SEARCH_ENGINE is searxng but PORTICO_SEARXNG_URL is not set" };
  }
  if (wanted === "brave") {
    return cfg.braveApiKey
      ? braveEngine(cfg.braveUrl, cfg.braveApiKey, cfg.timeoutMs)
      : { missing: "PORTICO_WEB_SEARCH_ENGINE is brave but PORTICO_BRAVE_SEARCH_API_KEY is not set" };
  }
  return { missing: "no search engine is configured on this server (set PORTICO_SEARXNG_URL, or PORTICO_BRAVE_SEARCH_API_KEY)" };
}
