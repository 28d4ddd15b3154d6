/**
 * The console's model catalog page in Chromium against a real `portico serve`: the catalog with each
 * endpoint's prices (USD per million tokens, converted exactly from the API's per-token strings), an
 * endpoint's prices and status changed through its form (read back from the API), a model added through the
 * form and refused when it already exists, and an API refusal shown as the form's alert. Tests wait for
 * selectors and responses, never for time.
 */
import { existsSync } from "node:fs";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { CHROMIUM, launch, serve, signIn, stopServe, type Browser, type Served } from "./browser-stack.js";

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("console model catalog in Chromium", { timeout: 90_000 }, () => {
  let s: Served;
  let b: Browser;
  let page: Page;
  let local: FakeUpstream;

  const call = async (method: string, path: string, body?: unknown, key = s.managementKey) => {
    const res = await fetch(`${s.origin}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const rowOf = (slug: string, provider: string) =>
    page.getByRole("row").filter({ hasText: slug }).filter({ has: page.getByRole("cell", { name: provider, exact: true }) });

  beforeAll(async () => {
    local = await startFakeOpenAI();
    s = await serve({ PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `local=${local.url}/v1`, PORTICO_KEYLESS_PROVIDERS: "local", PORTICO_WORKERS: "1" });
    // Expected on purpose: the refused add (400) and the existence check of a new slug (404).
    b = await launch(["status of 400", "status of 404"]);
    page = b.page;
    await signIn(page, s.origin, s.managementKey);
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await stopServe(s);
    await local?.close();
  });

  it("lists every endpoint with its prices per million tokens", async () => {
    await page.getByRole("link", { name: "Model catalog" }).click();
    await page.getByRole("heading", { level: 1, name: "Model catalog" }).waitFor();
    // GPT-4o on OpenAI: $2.50 / $10 per million tokens, cache reads $1.25 (the API says 0.0000025 / 0.00001 / 0.00000125 per token).
    const gpt4o = rowOf("openai/gpt-4o", "openai").filter({ hasNotText: "mini" });
    await gpt4o.waitFor();
    const cells = await gpt4o.getByRole("cell").allTextContents();
    expect(cells.slice(1, 7)).toEqual(["openai", "gpt-4o", "2.5", "10", "1.25", "128000"]);
    // An open-weight model is listed once per provider.
    for (const p of ["groq", "together", "fireworks"]) await rowOf("meta-llama/llama-3.3-70b-instruct", p).waitFor();
    expect(b.problems).toEqual([]);
  });

  it("changes an endpoint's prices and status through its form", async () => {
    const row = rowOf("meta-llama/llama-3.3-70b-instruct", "groq");
    await row.getByRole("button", { name: "Edit meta-llama/llama-3.3-70b-instruct on groq" }).click();
    await page.getByLabel("Prompt price for meta-llama/llama-3.3-70b-instruct on groq (USD per 1M tokens)").fill("0.5");
    await page.getByLabel("Completion price for meta-llama/llama-3.3-70b-instruct on groq (USD per 1M tokens)").fill("0.75");
    await page.getByLabel("Status of meta-llama/llama-3.3-70b-instruct on groq").selectOption("deprecated");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("status").filter({ hasText: "Saved meta-llama/llama-3.3-70b-instruct on groq." }).waitFor();
    const after = await call("GET", "/catalog/models/meta-llama/llama-3.3-70b-instruct");
    const groq = after.body.data.endpoints.find((e: { provider: string }) => e.provider === "groq");
    expect(groq).toMatchObject({ pricing: { prompt: "0.0000005", completion: "0.00000075" }, status: "deprecated" });
    expect(after.body.data.overridden).toBe(true);
    // The table shows the new figures (read again from the API).
    await rowOf("meta-llama/llama-3.3-70b-instruct", "groq").filter({ hasText: "deprecated" }).filter({ hasText: "0.75" }).waitFor();
    const audit = await call("GET", "/audit?action_prefix=catalog.");
    expect(audit.body.data[0]).toMatchObject({ action: "catalog.endpoint.update", target_id: "meta-llama/llama-3.3-70b-instruct" });
  });

  it("adds a model through the form, refuses an existing slug, and shows the API's refusal", async () => {
    await page.getByLabel("Slug", { exact: true }).fill("acme/local-8b");
    await page.getByLabel("Name", { exact: true }).fill("Acme Local 8B");
    await page.getByLabel("Provider", { exact: true }).selectOption("local");
    await page.getByLabel("Provider model id").fill("llama-3.1-8b");
    await page.getByLabel("Context length (tokens)").fill("32768");
    await page.getByLabel("Prompt price (USD per 1M tokens)").fill("0.02");
    await page.getByLabel("Completion price (USD per 1M tokens)").fill("0.04");
    await page.getByRole("button", { name: "Add model" }).click();
    await page.getByRole("status").filter({ hasText: "Added acme/local-8b." }).waitFor();
    await rowOf("acme/local-8b", "local").filter({ hasText: "0.04" }).waitFor();
    const added = await call("GET", "/models/acme/local-8b/endpoints", undefined, s.apiKey);
    expect(added.body.data.endpoints[0]).toMatchObject({ provider: "local", provider_model_id: "llama-3.1-8b", pricing: { prompt: "0.00000002", completion: "0.00000004" }, context_length: 32768 });

    // The same slug again: nothing is replaced.
    await page.getByLabel("Slug", { exact: true }).fill("acme/local-8b");
    await page.getByLabel("Name", { exact: true }).fill("Other");
    await page.getByLabel("Provider model id").fill("other");
    await page.getByLabel("Context length (tokens)").fill("1000");
    await page.getByLabel("Prompt price (USD per 1M tokens)").fill("1");
    await page.getByLabel("Completion price (USD per 1M tokens)").fill("1");
    await page.getByRole("button", { name: "Add model" }).click();
    await page.getByRole("alert").filter({ hasText: "acme/local-8b is already in the catalog" }).waitFor();
    expect((await call("GET", "/catalog/models/acme/local-8b")).body.data.name).toBe("Acme Local 8B");

    // A provider model id another model has: the API's 400 is the form's alert.
    await page.getByLabel("Slug", { exact: true }).fill("acme/dup");
    await page.getByLabel("Provider", { exact: true }).selectOption("local");
    await page.getByLabel("Provider model id").fill("llama-3.1-8b");
    await page.getByRole("button", { name: "Add model" }).click();
    await page.getByRole("alert").filter({ hasText: "model_id must name a model id no other model has" }).waitFor();
    expect((await call("GET", "/catalog/models/acme/dup")).status).toBe(404);
  });
});
