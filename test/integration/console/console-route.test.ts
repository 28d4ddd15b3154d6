/**
 * The console's static files over real HTTP: served under /console/ with a strict CSP and hardening
 * headers, /console redirects, nothing outside src/console is reachable, the OpenAPI document does not
 * list the console, and the sources keep to what the CSP allows (no inline script or style, no
 * innerHTML, no eval).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP, CONSOLE_ROOT } from "../../../src/gateway/routes/console.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

describe("console static files", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("serves index.html with the CSP and hardening headers", async () => {
    const res = await fetch(`${h.baseUrl}/console/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toBe(CONSOLE_CSP);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).not.toContain("unsafe");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("cross-origin-opener-policy")).toBe("same-origin");
    const html = await res.text();
    expect(html).toContain('<script type="module" src="app.js"></script>');
  });

  it("redirects /console to /console/", async () => {
    const res = await fetch(`${h.baseUrl}/console`, { redirect: "manual" });
    expect(res.status).toBe(301);
    expect(res.headers.get("location")).toBe("/console/");
    expect(res.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
  });

  it("serves every module and the stylesheet with their types", async () => {
    for (const [path, type] of [
      ["app.js", /javascript/],
      ["lib/sse.js", /javascript/],
      ["pages/interns.js", /javascript/],
      ["console.css", /^text\/css/],
    ] as const) {
      const res = await fetch(`${h.baseUrl}/console/${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type"), path).toMatch(type);
      expect(res.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    }
  });

  it("reaches nothing outside the console folder; unknown files are 404 in the envelope", async () => {
    for (const path of ["/console/%2e%2e/%2e%2e/package.json", "/console/..%2f..%2fpackage.json", "/console/nope.js", "/console/.hidden"]) {
      const res = await fetch(`${h.baseUrl}${path}`);
      expect([403, 404], path).toContain(res.status);
      const body = (await res.json()) as { error: { code: number } };
      expect(body.error.code).toBe(res.status);
      expect(JSON.stringify(body)).not.toContain("portico");
    }
  });

  it("is not part of the OpenAPI document", async () => {
    const doc = (await (await fetch(`${h.baseUrl}/api/v1/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).some((p) => p.startsWith("/console"))).toBe(false);
  });

  it("keeps to the CSP: no inline script or style, no innerHTML, no eval", () => {
    const files = filesUnder(CONSOLE_ROOT);
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      const text = readFileSync(file, "utf8");
      expect(text, file).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
      if (file.endsWith(".html")) {
        expect(text, file).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
        expect(text, file).not.toMatch(/\sstyle=|<style|\son[a-z]+=/i);
      }
      if (file.endsWith(".js")) expect(text, file).not.toMatch(/\.style\.|setAttribute\("style"/);
    }
  });
});
