/** The core URL list of the gateway (PORTICO_CORE_URL) and the host (--core): order kept, bad entries named. */
import { describe, expect, it } from "vitest";
import { parseCoreUrls } from "../../../src/lib/core-urls.js";

describe("parseCoreUrls", () => {
  it("keeps the failover order and trims blanks", () => {
    expect(parseCoreUrls(" http://a:1 , https://b:2,", "X")).toEqual(["http://a:1", "https://b:2"]);
    expect(parseCoreUrls("http://a:1", "X")).toEqual(["http://a:1"]);
  });
  it("names the setting and the bad entry", () => {
    expect(() => parseCoreUrls(" , ", "PORTICO_CORE_URL")).toThrow(/PORTICO_CORE_URL: give at least one core URL/);
    expect(() => parseCoreUrls("http://a:1,core2:50051", "intern-host --core")).toThrow(/intern-host --core: core2:50051 is not an http/);
    expect(() => parseCoreUrls("ftp://a", "X")).toThrow(/ftp:\/\/a/);
  });
});
