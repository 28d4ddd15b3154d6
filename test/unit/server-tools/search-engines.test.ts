/** The search engine adapters against fakes on loopback in the engines' wire formats: SearXNG and the Brave Search API. */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { braveEngine, configuredEngine, SearchFailed, searxngEngine } from "../../../src/core/chat/server-tools/search-engines.js";

let server: Server;
let base = "";
const seen: IncomingMessage[] = [];
let searxJson = true;

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req);
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/search") {
      if (!searxJson) return void res.writeHead(403, { "content-type": "text/html" }).end("<h1>403 Forbidden</h1>");
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        query: url.searchParams.get("q"),
        results: [{ url: "https://a.example/", title: "A", content: "first" }, { url: "https://b.example/", title: "B", content: "second" }, { title: "no url" }],
      }));
    }
    if (url.pathname === "/res/v1/web/search") {
      if (req.headers["x-subscription-token"] !== "brave-key-123") return void res.writeHead(401, { "content-type": "application/json" }).end('{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","status":401}}');
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        type: "search",
        query: { original: url.searchParams.get("q") },
        web: { type: "search", results: [{ title: "Brave A", url: "https://brave.example/a", description: "<strong>tide</strong> tables", language: "en" }] },
      }));
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const q = (query: string, count = 5) => ({ query, count, signal: new AbortController().signal });

describe("search engines", () => {
  it("SearXNG: GET /search?q=&format=json, results mapped, entries without a URL dropped, count honoured", async () => {
    const engine = searxngEngine(base, 5_000);
    expect(await engine.search(q("tides"))).toEqual([
      { title: "A", url: "https://a.example/", snippet: "first" },
      { title: "B", url: "https://b.example/", snippet: "second" },
    ]);
    expect(await engine.search(q("tides", 1))).toHaveLength(1);
    expect(seen.at(-1)!.url).toBe("/search?q=tides&format=json");
  });

  it("SearXNG without the json format: the error says what the operator must change", async () => {
    searxJson = false;
    try {
      await expect(searxngEngine(base, 5_000).search(q("x"))).rejects.toThrow(/list json in search.formats/);
    } finally {
      searxJson = true;
    }
  });

  it("Brave: the key in X-Subscription-Token, never in an error", async () => {
    const results = await braveEngine(base, "brave-key-123", 5_000).search(q("tides", 3));
    expect(results).toEqual([{ title: "Brave A", url: "https://brave.example/a", snippet: "<strong>tide</strong> tables" }]);
    expect(seen.at(-1)!.url).toBe("/res/v1/web/search?q=tides&count=3");
    const err = await braveEngine(base, "wrong-key-999", 5_000).search(q("x")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SearchFailed);
    expect((err as Error).message).toMatch(/refused the configured key \(401\)/);
    expect((err as Error).message).not.toContain("wrong-key-999");
  });

  it("configuration: SearXNG first, Brave with a key, else what is missing", () => {
    const cfg = { engine: undefined, searxngUrl: undefined, braveUrl: base, braveApiKey: undefined, timeoutMs: 1000 };
    expect(configuredEngine(cfg)).toEqual({ missing: expect.stringMatching(/no search engine is configured/) });
    expect((configuredEngine({ ...cfg, braveApiKey: "k" }) as { name: string }).name).toBe("brave");
    expect((configuredEngine({ ...cfg, braveApiKey: "k", searxngUrl: base }) as { name: string }).name).toBe("searxng");
    expect(configuredEngine({ ...cfg, engine: "brave" })).toEqual({ missing: expect.stringMatching(/PORTICO_BRAVE_SEARCH_API_KEY/) });
  });
});
