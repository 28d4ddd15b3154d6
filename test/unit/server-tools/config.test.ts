/** The server tools' settings (src/config.ts): defaults, the address allow list and engine choice checked at start-up. */
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../../src/config.js";

describe("server tools settings", () => {
  it("defaults: 8 turns, no private address, no engine, Brave's public base URL", () => {
    expect(loadConfig({}).serverTools).toEqual({
      maxTurns: 8,
      webFetch: { allowAddresses: [], maxBytes: 2_097_152, timeoutMs: 10_000 },
      search: { engine: undefined, searxngUrl: undefined, braveUrl: "https://api.search.brave.com", braveApiKey: undefined, timeoutMs: 10_000 },
    });
  });

  it("an allow list of addresses and CIDR ranges; anything else stops the start naming the variable", () => {
    expect(loadConfig({ PORTICO_WEB_FETCH_ALLOW_ADDRESSES: "127.0.0.1, 10.0.0.0/8,::1" }).serverTools.webFetch.allowAddresses).toEqual(["127.0.0.1", "10.0.0.0/8", "::1"]);
    expect(() => loadConfig({ PORTICO_WEB_FETCH_ALLOW_ADDRESSES: "localhost" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORTICO_WEB_FETCH_ALLOW_ADDRESSES: "10.0.0.0/99" })).toThrow(/PORTICO_WEB_FETCH_ALLOW_ADDRESSES/);
  });

  it("engine, URLs and the turn bound are checked", () => {
    expect(() => loadConfig({ PORTICO_WEB_SEARCH_ENGINE: "google" })).toThrow(/PORTICO_WEB_SEARCH_ENGINE/);
    expect(() => loadConfig({ PORTICO_SEARXNG_URL: "ftp://x" })).toThrow(/PORTICO_SEARXNG_URL must be an http\(s\) URL/);
    expect(() => loadConfig({ PORTICO_SERVER_TOOLS_MAX_TURNS: "0" })).toThrow(/PORTICO_SERVER_TOOLS_MAX_TURNS/);
    expect(loadConfig({ PORTICO_SEARXNG_URL: "http://searx.internal:8888/" }).serverTools.search.searxngUrl).toBe("http://searx.internal:8888");
  });
});
