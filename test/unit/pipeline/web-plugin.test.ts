/**
 * The web plugin without a server (src/core/chat/pipeline/plugins/web.ts): domain patterns, citations of the
 * answer, the refusal when no search engine is configured; the Brave adapter's location (a fake on loopback).
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { citationsOf, filterResults, parseDomainPattern } from "../../../src/core/chat/pipeline/plugins/web.js";
import { createPluginsStage } from "../../../src/core/chat/pipeline/plugins/index.js";
import { compose, newCall, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { braveEngine } from "../../../src/core/chat/server-tools/search-engines.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";

const r = (url: string) => ({ url, title: url, snippet: "" });

describe("domain patterns", () => {
  const keep = (patterns: string[], urls: string[], mode: "include" | "exclude") => {
    const ps = patterns.map((p) => parseDomainPattern(p)!);
    return filterResults(urls.map(r), mode === "include" ? ps : undefined, mode === "exclude" ? ps : undefined).map((x) => x.url);
  };
  const urls = ["https://example.com/a", "https://www.example.com/docs/x", "https://notexample.com/", "https://example.org/docs", "https://a.b.example.com/blog/2024/post"];
  it("a bare domain matches itself and its subdomains, not a longer name", () => {
    expect(keep(["example.com"], urls, "include")).toEqual(["https://example.com/a", "https://www.example.com/docs/x", "https://a.b.example.com/blog/2024/post"]);
  });
  it("*.domain matches subdomains only; a * elsewhere is a glob; a scheme is ignored", () => {
    expect(keep(["*.example.com"], urls, "include")).toEqual(["https://www.example.com/docs/x", "https://a.b.example.com/blog/2024/post"]);
    expect(keep(["example.*"], urls, "include")).toEqual(["https://example.com/a", "https://example.org/docs"]);
    expect(keep(["https://notexample.com"], urls, "include")).toEqual(["https://notexample.com/"]);
  });
  it("a path is a prefix by segments, with wildcards", () => {
    expect(keep(["example.com/docs", "example.org/docs"], urls, "include")).toEqual(["https://www.example.com/docs/x", "https://example.org/docs"]);
    expect(keep(["example.com/doc"], urls, "include")).toEqual([]);
    expect(keep(["example.com/blog/*/post"], urls, "exclude")).toEqual(urls.slice(0, 4));
  });
  it("not a pattern: empty, spaces, odd characters", () => {
    for (const bad of ["", " ", "a b.com", "exa$mple.com", "/docs"]) expect(parseDomainPattern(bad)).toBeUndefined();
  });
});

describe("citations", () => {
  const results = [{ url: "https://a.example/x", title: "A", snippet: "sa" }, { url: "https://b.example/", title: "B", snippet: "" }, { url: "https://c.example/", title: "C", snippet: "" }];
  it("a markdown link spans [text](url); a bare URL spans the URL; uncited results are left out; sorted by position", () => {
    const text = "See https://b.example and [a.example](https://a.example/x).";
    const out = citationsOf(text, results);
    expect(out.map((c) => c.url_citation.url)).toEqual(["https://b.example/", "https://a.example/x"]);
    const [b, a] = out;
    expect(text.slice(a!.url_citation.start_index, a!.url_citation.end_index)).toBe("[a.example](https://a.example/x)");
    expect(text.slice(b!.url_citation.start_index, b!.url_citation.end_index)).toBe("https://b.example");
    expect(a!.url_citation).toMatchObject({ title: "A", content: "sa" });
    expect(b!.url_citation.content).toBeUndefined();
  });
  it("no link, no annotation", () => expect(citationsOf("nothing cited", results)).toEqual([]));
});

describe("the web plugin with no search engine configured", () => {
  const caller: Caller = { keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1", isManagement: false, internsProgramme: false };
  const answer: ChatStage = { name: "answer", async run() { throw new Error("must not be called"); } };
  const attempt = (search: NonNullable<Parameters<typeof createPluginsStage>[0]>["search"], plugin: Record<string, unknown>) => {
    const call = newCall(caller, new AbortController().signal, false, { model: "m", messages: [{ role: "user", content: "hi" }], plugins: [plugin] } as unknown as CanonicalRequest);
    return compose([createPluginsStage({ config: { moderation: undefined }, ...(search ? { search } : {}) }), answer])(call).then(() => undefined, (e: unknown) => e as ConnectError);
  };
  const none = { engine: undefined, searxngUrl: undefined, braveUrl: "https://api.search.brave.com", braveApiKey: undefined, timeoutMs: 1000 };
  it("400 naming plugins[0].id and what the operator sets", async () => {
    for (const search of [undefined, none]) {
      const err = await attempt(search, { id: "web" });
      expect(errorDetailOf(err!)?.field).toBe("plugins[0].id");
      expect(err!.rawMessage).toContain("PORTICO_SEARXNG_URL");
      expect(err!.rawMessage).not.toContain("undefined");
    }
  });
  it("a named engine that is not configured: 400 naming plugins[0].engine", async () => {
    const err = await attempt(none, { id: "web", engine: "searxng" });
    expect(errorDetailOf(err!)?.field).toBe("plugins[0].engine");
    expect(err!.rawMessage).toContain("PORTICO_SEARXNG_URL is not set");
  });
});

describe("Brave takes the searcher's location", () => {
  let server: Server;
  let base = "";
  const seen: IncomingMessage[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ type: "search", web: { results: [{ title: "T", url: "https://t.example/", description: "d" }] } }));
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));
  it("country as a parameter and the X-Loc headers; none without a location", async () => {
    const engine = braveEngine(base, "k", 5000);
    expect(engine.takesLocation).toBe(true);
    await engine.search({ query: "cafe", count: 3, signal: new AbortController().signal, location: { city: "Brest", country: "fr", region: "Bretagne", timezone: "Europe/Paris" } });
    const req = seen.at(-1)!;
    expect(new URL(req.url!, "http://x").searchParams.get("country")).toBe("FR");
    expect(req.headers).toMatchObject({ "x-loc-city": "Brest", "x-loc-country": "FR", "x-loc-state-name": "Bretagne", "x-loc-timezone": "Europe/Paris" });
    await engine.search({ query: "cafe", count: 3, signal: new AbortController().signal });
    expect(seen.at(-1)!.headers["x-loc-city"]).toBeUndefined();
    expect(new URL(seen.at(-1)!.url!, "http://x").searchParams.has("country")).toBe(false);
  });
});
