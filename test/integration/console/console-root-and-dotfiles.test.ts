/**
 * The way into the console over real HTTP: `GET /` redirects to /console/ (302, with the console's
 * headers), and a dot-file under /console/ is a 404 in the error envelope, as docs/console.md says, like
 * a file that does not exist (it was a 403).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP } from "../../../src/gateway/routes/console.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

describe("console entry points", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("GET / leads to the console", async () => {
    const res = await fetch(`${h.baseUrl}/`, { redirect: "manual" });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/console/");
    expect(res.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    const followed = await fetch(`${h.baseUrl}/`);
    expect(followed.status).toBe(200);
    expect(await followed.text()).toContain('<script type="module" src="app.js"></script>');
  });

  it("dot-files and paths outside the folder are 404 in the error envelope, like missing files", async () => {
    for (const path of ["/console/.hidden", "/console/.env", "/console/.git/config", "/console/pages/.x.js", "/console/nope.js", "/console/%2e%2e/%2e%2e/package.json", "/console/..%2f..%2fpackage.json"]) {
      const res = await fetch(`${h.baseUrl}${path}`);
      expect(res.status, path).toBe(404);
      const body = (await res.json()) as { error: { code: number; message: string } };
      expect(body.error.code, path).toBe(404);
    }
  });
});
