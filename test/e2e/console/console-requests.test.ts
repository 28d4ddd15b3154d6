/**
 * The console's request log (docs/console.md, "Request log") in Chromium against a real `portico serve`:
 * generations written into its database (one served by each of two keys, providers and outcomes, with a
 * user, session, trace and metadata on one) are listed newest first 50 a page, paged by cursor ("Older
 * requests", "Newest requests"), filtered by model, provider, status, API key and time through the page's
 * form, and one opened shows its record (attempts, timings, tokens, cost, user, session, trace, metadata);
 * the page passes axe-core's WCAG checks and breaks no Content-Security-Policy.
 */
import { createHash, randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/db/client.js";
import { loadKeyring } from "../../../src/core/byok/keyring.js";
import { contentAad } from "../../../src/core/chat/content-log.js";
import { CHROMIUM, launch, serve, signIn, stopServe, type Browser, type Served } from "./browser-stack.js";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("console request log in Chromium", { timeout: 90_000 }, () => {
  let s: Served;
  let b: Browser;
  let page: Page;
  /** Ids newest first, as the page must list them. */
  const ids: string[] = [];
  const special = `gen-${randomUUID()}`;
  const base = Date.UTC(2026, 10, 20, 12, 0, 0);

  beforeAll(async () => {
    s = await serve();
    const me = (await (await fetch(`${s.origin}/api/v1/key`, { headers: { authorization: `Bearer ${s.managementKey}` } })).json()) as any;
    const org: string = me.data.organization_id;
    const workspace: string = me.data.workspace_id;
    // 60 generations a minute apart: the newest (index 0) is the special one, 1–9 errors of the ordinary key
    // on anthropic, the rest successes of the management key on openai.
    const rows = Array.from({ length: 60 }, (_, i) => {
      const id = i === 0 ? special : `gen-${randomUUID()}`;
      ids.push(id);
      const failed = i >= 1 && i <= 9;
      return {
        id, organizationId: org, workspaceId: workspace,
        keyHash: sha256(failed ? s.apiKey : s.managementKey),
        requestedModel: failed ? "anthropic/claude-sonnet-4" : "openai/gpt-4o-mini",
        model: failed ? null : "openai/gpt-4o-mini", provider: failed ? null : "openai",
        credentialSource: failed ? null : "shared", streamed: i % 2 === 0,
        promptTokens: failed ? null : 100 + i, completionTokens: failed ? null : 20, totalTokens: failed ? null : 120 + i,
        latencyMs: 300 + i, timeToFirstTokenMs: i % 2 === 0 ? 80 : null,
        status: failed ? "error" : "success", errorCode: failed ? 502 : null, finishReason: failed ? null : "stop",
        attempts: failed ? 3 : 1, createdAt: new Date(base - i * 60_000),
        costFemtoUsd: failed ? null : 2_200_000_000_000n, upstreamCostFemtoUsd: failed ? null : 2_200_000_000_000n,
        ...(i === 0
          ? { user: "alice", sessionId: "sess-42", traceId: "trace-7", trace: JSON.stringify({ trace_id: "trace-7", trace_name: "nightly" }), metadata: JSON.stringify({ team: "search" }),
              attemptsLog: JSON.stringify([
                { provider: "groq", model: "openai/gpt-4o-mini", credential_source: "byok", status: 429, reason: "rate_limited", duration_ms: 12, retry_after_ms: 30000 },
                { provider: "openai", model: "openai/gpt-4o-mini", credential_source: "shared", status: 200, reason: "served", duration_ms: 80 },
              ]) }
          : {}),
      };
    });
    const database = await openDatabase({ dataDir: s.dataDir, migrate: false });
    try {
      await database.db.generation.createMany({ data: rows });
      // The special request's logged content (docs/operations.md, "Content logging"), sealed with the server's keyring.
      const keyring = loadKeyring({ masterKey: process.env.PORTICO_MASTER_KEY, masterKeyFile: process.env.PORTICO_MASTER_KEY_FILE, dataDir: s.dataDir, production: false });
      const plain = JSON.stringify({
        request: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "What is the capital of France?" }] },
        response: { id: special, choices: [{ index: 0, message: { role: "assistant", content: "Paris." }, finish_reason: "stop" }] },
      });
      const { keyId, blob } = keyring.seal(Buffer.from(plain), contentAad(special, org));
      await database.db.generationContent.create({
        data: { id: special, organizationId: org, workspaceId: workspace, keyId, ciphertext: new Uint8Array(blob), createdAt: new Date(), expiresAt: new Date(Date.now() + 86_400_000) },
      });
    } finally {
      await database.close();
    }
    b = await launch(["status of 404"]);
    page = b.page;
    await signIn(page, s.origin, s.managementKey);
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await stopServe(s);
  });

  /** The ids of the listed rows, in order, once the list (or its empty note) is shown. */
  async function listed(): Promise<string[]> {
    await page.locator("main p[role=status]:not(.loading)").first().waitFor();
    return (await page.evaluate(`[...document.querySelectorAll("main tr[data-id]")].map((tr) => tr.dataset.id)`)) as string[];
  }
  /** Waits until `expression` is true in the page (evaluated over CDP: page-side eval would break the CSP). */
  const until = (expression: string) => expect.poll(() => page.evaluate(expression), { timeout: 30_000 }).toBe(true);
  async function open(hash: string): Promise<string[]> {
    await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
    await page.getByRole("heading", { level: 1, name: "Request log" }).waitFor();
    return listed();
  }

  it("lists newest first, 50 a page, and pages by cursor", async () => {
    await page.getByRole("link", { name: "Request log" }).click();
    await page.getByRole("heading", { level: 1, name: "Request log" }).waitFor();
    expect(await listed()).toEqual(ids.slice(0, 50));
    await page.getByRole("link", { name: "Older requests" }).click();
    await until(`document.querySelectorAll("main tr[data-id]").length === 10`);
    expect(await listed()).toEqual(ids.slice(50));
    expect(await page.getByRole("link", { name: "Older requests" }).count()).toBe(0);
    await page.getByRole("link", { name: "Newest requests" }).click();
    await until(`document.querySelectorAll("main tr[data-id]").length === 50`);
    expect((await listed())[0]).toBe(special);
  });

  it("filters by status, provider, model, key and time through the form", async () => {
    await open("#/requests");
    await page.getByLabel("Status").selectOption("error");
    await page.getByRole("button", { name: "Filter" }).click();
    await until(`location.hash.includes("status=error") && document.querySelectorAll("main tr[data-id]").length === 9`);
    expect(await listed()).toEqual(ids.slice(1, 10));
    expect(await page.locator("main tbody tr").first().textContent()).toContain("error (502)");

    await open("#/requests");
    await page.getByLabel("Provider").fill("openai");
    await page.getByLabel("Model").fill("openai/gpt-4o-mini");
    await page.getByRole("button", { name: "Filter" }).click();
    // The unfiltered list has 50 rows too: wait for the filtered rows themselves, not for their count (the hash
    // changes before the filtered page replaces the one shown).
    const openaiRows = [ids[0]!, ...ids.slice(10, 59)];
    await until(`location.hash.includes("provider=openai") && [...document.querySelectorAll("main tr[data-id]")].map((tr) => tr.dataset.id).join() === ${JSON.stringify(openaiRows.join())}`);
    expect(await listed()).toEqual(openaiRows);

    await open("#/requests");
    const keys = (await (await fetch(`${s.origin}/api/v1/keys`, { headers: { authorization: `Bearer ${s.managementKey}` } })).json()) as any;
    const ordinary = keys.data.find((k: any) => k.hash === sha256(s.apiKey));
    await page.getByLabel("API key").selectOption(ordinary.hash);
    await page.getByRole("button", { name: "Filter" }).click();
    await until(`location.hash.includes("key=") && document.querySelectorAll("main tr[data-id]").length === 9`);
    expect(await listed()).toEqual(ids.slice(1, 10));

    // The browser runs in UTC: minutes 12:00 back to 11:55 inclusive are ids 0–5; "to" is exclusive.
    await open("#/requests");
    await page.getByLabel("From").fill("2026-11-20T11:55");
    await page.getByLabel("To").fill("2026-11-20T12:00");
    await page.getByRole("button", { name: "Filter" }).click();
    await until(`location.hash.includes("from=") && document.querySelectorAll("main tr[data-id]").length === 5`);
    expect(await listed()).toEqual(ids.slice(1, 6));
    await page.getByRole("link", { name: "Clear filters" }).click();
    await until(`document.querySelectorAll("main tr[data-id]").length === 50`);
  });

  it("opens one request with its attempts, timings, tokens, cost and context, and links its session", async () => {
    await open("#/requests");
    await page.getByRole("link", { name: `Open request ${special}` }).click();
    await page.getByRole("heading", { level: 1, name: "Request" }).waitFor();
    await page.getByRole("heading", { level: 2, name: "Context" }).waitFor();
    const facts = (await page.evaluate(`Object.fromEntries([...document.querySelectorAll("main dt")].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))`)) as Record<string, string>;
    expect(facts).toMatchObject({
      Id: special,
      Status: "success",
      Provider: "openai",
      Attempts: "1",
      Latency: "300 ms",
      "Time to first chunk": "80 ms",
      Prompt: "100",
      Completion: "20",
      "Cost to the account": "$0.0022",
      Metadata: '{"team":"search"}',
      Trace: '{"trace_id":"trace-7","trace_name":"nightly"}',
    });
    // Each attempt and why it ended, in order.
    const attempts = (await page.evaluate(
      `[...document.querySelectorAll('main section[aria-label="Attempts"] tbody tr')].map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent))`,
    )) as string[][];
    expect(attempts).toEqual([
      ["1", "groq", "openai/gpt-4o-mini", "own key (BYOK)", "429", "rate_limited", "12 ms", "30000 ms", "—"],
      ["2", "openai", "openai/gpt-4o-mini", "shared", "200", "served", "80 ms", "—", "—"],
    ]);
    expect(facts.User).toContain("alice");
    // The logged request and response bodies (the console signs in with a management key).
    await page.getByRole("heading", { level: 3, name: "Response" }).waitFor();
    const contentText = await page.getByRole("region", { name: "Content" }).textContent();
    expect(contentText).toContain("What is the capital of France?");
    expect(contentText).toContain("Paris.");
    expect(facts.Session).toContain("sess-42");
    await page.locator("dd", { hasText: "sess-42" }).getByRole("link", { name: "all its requests" }).click();
    await page.getByRole("heading", { level: 1, name: "Request log" }).waitFor();
    expect(await listed()).toEqual([special]);

    await page.evaluate(`location.hash = "#/requests/gen-00000000-0000-0000-0000-000000000000"`);
    await page.getByText("No such request in this organization.").waitFor();

    // A request without logged content says so.
    await page.evaluate(`location.hash = ${JSON.stringify(`#/requests/${ids[12]}`)}`);
    await page.getByText("No content was logged for this request", { exact: false }).waitFor();
  });

  it("fits a narrow screen, passes axe-core's WCAG 2 A and AA checks, and broke no Content-Security-Policy", async () => {
    await open("#/requests");
    await page.setViewportSize({ width: 360, height: 740 });
    try {
      expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")).toBe(true);
    } finally {
      await page.setViewportSize({ width: 1200, height: 820 });
    }
    const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
    await page.evaluate(axeSource);
    for (const hash of ["#/requests", `#/requests/${special}`]) {
      await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
      await page.locator("main table, main dl").first().waitFor();
      const result = (await page.evaluate(`axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
        .then((r) => ({ passes: r.passes.length, violations: r.violations.map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")) }))`)) as {
        passes: number;
        violations: string[];
      };
      expect(result.violations, hash).toEqual([]);
      expect(result.passes).toBeGreaterThan(5);
    }
    if (process.env["PORTICO_CONSOLE_SCREENSHOTS"]) {
      await open("#/requests?status=error");
      await page.screenshot({ path: `${process.env["PORTICO_CONSOLE_SCREENSHOTS"]}/request-log.png`, fullPage: true });
      await page.evaluate(`location.hash = ${JSON.stringify(`#/requests/${special}`)}`);
      await page.getByRole("heading", { level: 2, name: "Context" }).waitFor();
    }
    if (process.env["PORTICO_CONSOLE_SCREENSHOTS"]) await page.screenshot({ path: `${process.env["PORTICO_CONSOLE_SCREENSHOTS"]}/requests.png`, fullPage: true });
    expect(b.problems).toEqual([]);
  });
});
