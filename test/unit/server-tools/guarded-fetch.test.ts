/**
 * web_fetch's SSRF guard against real HTTP servers on loopback: private and loopback addresses refused
 * (literals and names resolving to them, through the client's own lookup), redirects re-checked, loopback
 * allowed only through the operator's list, and the size, content-type and domain bounds.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addressAllowed, createGuardedFetcher, FetchRefused, type LookupFn } from "../../../src/core/chat/server-tools/guarded-fetch.js";
import { pageText } from "../../../src/core/chat/server-tools/page-text.js";

let site: Server;
let port = 0;
let hits = 0;
const ARTICLE = `<!doctype html><html><head><title>Tides</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Tides of the bay</h1>
<p>The tide rises twice a day in the bay, and the harbour master keeps a table of the times for sailors who leave early in the morning, before the fishing fleet and the ferries crowd the narrow channel at the mouth of the bay.</p>
<p>Spring tides come with the new and the full moon; neap tides with the quarters. The difference matters for boats with a deep keel, which must wait for the water to cover the sand bar that runs across the entrance.</p>
<table><thead><tr><th>Day</th><th>High</th></tr></thead><tbody><tr><td>Mon</td><td>06:10</td></tr><tr><td>Tue</td><td>06:55</td></tr></tbody></table>
<p>See <a href="/more">more tables</a>.</p></article>
<footer>© the harbour</footer><script>alert(1)</script></body></html>`;

beforeAll(async () => {
  site = createServer((req, res) => {
    hits++;
    if (req.url === "/article") return void res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(ARTICLE);
    if (req.url === "/to-metadata") return void res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
    if (req.url === "/to-article") return void res.writeHead(301, { location: "/article" }).end();
    if (req.url === "/loop") return void res.writeHead(302, { location: "/loop" }).end();
    if (req.url === "/image") return void res.writeHead(200, { "content-type": "image/png" }).end(Buffer.alloc(100));
    if (req.url === "/big") return void res.writeHead(200, { "content-type": "text/plain" }).end("x".repeat(50_000));
    res.writeHead(404, { "content-type": "text/plain" }).end("no");
  });
  await new Promise<void>((r) => site.listen(0, "127.0.0.1", r));
  port = (site.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => site.close(() => r())));

const base = { maxBytes: 1_000_000, timeoutMs: 5_000 };
const refusal = (p: Promise<unknown>) => p.then(() => "fetched", (e: unknown) => (e instanceof FetchRefused ? e.message : `other: ${String(e)}`));
/** A resolver that answers every name with the given address (a rebinding or internal name). */
const resolvesTo = (address: string, family = 4): LookupFn => (_h, _o, cb) => cb(null, [{ address, family }]);

describe("address classes", () => {
  it.each([
    ["127.0.0.1", false], ["10.1.2.3", false], ["192.168.0.1", false], ["172.16.0.1", false], ["169.254.169.254", false],
    ["100.64.0.1", false], ["0.0.0.0", false], ["::1", false], ["fd00::1", false], ["fe80::1", false], ["::ffff:127.0.0.1", false],
    ["64:ff9b::7f00:1", false], ["2002:7f00:1::", false], ["240.0.0.1", false], ["8.8.8.8", true], ["2606:4700::1111", true],
  ])("%s allowed: %s", (address, ok) => {
    expect(addressAllowed(address, [])).toBe(ok);
  });
});

describe("guarded fetch", () => {
  it("an address literal on loopback is refused without a connection", async () => {
    const f = createGuardedFetcher({ ...base, allowAddresses: [] });
    const before = hits;
    expect(await refusal(f.fetchPage(`http://127.0.0.1:${port}/article`))).toMatch(/may not connect/);
    expect(await refusal(f.fetchPage(`http://[::ffff:127.0.0.1]:${port}/article`))).toMatch(/may not connect/);
    expect(await refusal(f.fetchPage(`http://2130706433:${port}/article`))).toMatch(/may not connect/);
    expect(hits).toBe(before);
  });

  it("a name resolving to loopback is refused in the client's own lookup (real DNS: localhost), unless the operator allows it", async () => {
    const f = createGuardedFetcher({ ...base, allowAddresses: [] });
    expect(await refusal(f.fetchPage(`http://localhost:${port}/article`))).toMatch(/resolves to an address web_fetch may not connect to/);
    const rebinding = createGuardedFetcher({ ...base, allowAddresses: [], lookup: resolvesTo("127.0.0.1") });
    expect(await refusal(rebinding.fetchPage(`http://public.example:${port}/article`))).toMatch(/public.example resolves to an address/);
    const allowed = createGuardedFetcher({ ...base, allowAddresses: ["127.0.0.1"], lookup: resolvesTo("127.0.0.1") });
    const page = await allowed.fetchPage(`http://public.example:${port}/article`);
    expect(page.status).toBe(200);
  });

  it("schemes other than http(s) and URLs with credentials are refused", async () => {
    const f = createGuardedFetcher({ ...base, allowAddresses: ["127.0.0.1"] });
    expect(await refusal(f.fetchPage("file:///etc/passwd"))).toMatch(/only http and https/);
    expect(await refusal(f.fetchPage(`http://u:p@127.0.0.1:${port}/article`))).toMatch(/credentials/);
  });

  it("redirects are followed by hand and re-checked: to the metadata address refused; at most 5", async () => {
    const f = createGuardedFetcher({ ...base, allowAddresses: ["127.0.0.1"] });
    expect(await refusal(f.fetchPage(`http://127.0.0.1:${port}/to-metadata`))).toMatch(/169\.254\.169\.254 is an address web_fetch may not connect to/);
    const page = await f.fetchPage(`http://127.0.0.1:${port}/to-article`);
    expect(page.finalUrl).toBe(`http://127.0.0.1:${port}/article`);
    expect(await refusal(f.fetchPage(`http://127.0.0.1:${port}/loop`))).toMatch(/more than 5 redirects/);
  });

  it("content type, size and domain bounds", async () => {
    const f = createGuardedFetcher({ ...base, maxBytes: 1024, allowAddresses: ["127.0.0.1"] });
    expect(await refusal(f.fetchPage(`http://127.0.0.1:${port}/image`))).toMatch(/content type image\/png/);
    const big = await f.fetchPage(`http://127.0.0.1:${port}/big`);
    expect(big.body.length).toBe(1024);
    expect(big.truncated).toBe(true);
    expect(await refusal(f.fetchPage(`http://127.0.0.1:${port}/article`, { blockedDomains: ["127.0.0.1"] }))).toMatch(/blocked_domains/);
    expect(await refusal(f.fetchPage(`http://127.0.0.1:${port}/article`, { allowedDomains: ["example.com"] }))).toMatch(/not in allowed_domains/);
  });

  it("HTML becomes readable markdown: main content kept (with the table), navigation, footer and scripts dropped, links absolute", async () => {
    const f = createGuardedFetcher({ ...base, allowAddresses: ["127.0.0.1"] });
    const page = await f.fetchPage(`http://127.0.0.1:${port}/article`);
    const { title, text } = await pageText(page.body, page.contentType, page.finalUrl);
    expect(title).toBe("Tides");
    expect(text).toContain("The tide rises twice a day");
    expect(text).toMatch(/\| Day\s*\| High\s*\|/);
    expect(text).toContain(`http://127.0.0.1:${port}/more`);
    expect(text).not.toContain("alert(1)");
    expect(text).not.toContain("© the harbour");
    expect(text).not.toContain("[About]");
    // A page that is not an article: its body without navigation, links absolute.
    const plain = await pageText(Buffer.from('<html><body><nav><a href="/">Home</a></nav><p>Short <a href="/x">x</a></p></body></html>'), "text/html", "http://h.test/a/b");
    expect(plain.text).toBe("Short [x](http://h.test/x)");
  });
});
