/**
 * The console as operators use it daily (issue 25), in Chromium against a real `portico serve`: no
 * console action replaces a preset's designated version without showing what changes, the signed-in
 * key is not disabled without a warning, an intern's pending question is readable and its run can be
 * stopped from the intern page, BYOK offers the providers that can serve, loading states, names instead
 * of ids, a workspace selector and a read-only configuration on presets, the audit filter by prefix, and
 * the playground. Tests wait for selectors and responses, never for time.
 */
import { existsSync } from "node:fs";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { CHROMIUM, launch, serve, signIn, stopServe, type Browser, type Served } from "./browser-stack.js";

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("console operations in Chromium", { timeout: 90_000 }, () => {
  let s: Served;
  let b: Browser;
  let page: Page;
  let local: FakeUpstream;
  let vllm: FakeUpstream;

  /** The public API with the management key (or another). */
  const call = async (method: string, path: string, body?: unknown, key = s.managementKey) => {
    const res = await fetch(`${s.origin}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const goto = async (hash: string, heading: string) => {
    await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
    await page.getByRole("heading", { level: 1, name: heading, exact: true }).waitFor();
  };

  beforeAll(async () => {
    // A local OpenAI-compatible server that needs no key, and one that takes credentials (both fakes).
    [local, vllm] = await Promise.all([startFakeOpenAI(), startFakeOpenAI()]);
    s = await serve({
      PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `local=${local.url}/v1,vllm=${vllm.url}/v1`,
      PORTICO_KEYLESS_PROVIDERS: "local",
    });
    // Expected on purpose: the playground's refused request (400).
    b = await launch(["status of 400"]);
    page = b.page;
    await signIn(page, s.origin, s.managementKey);
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await stopServe(s);
    await Promise.all([local?.close(), vllm?.close()]);
  });

  it("New preset refuses an existing slug instead of replacing its live configuration", async () => {
    const made = await call("POST", "/presets/live-bot/chat/completions", {
      model: "openai/gpt-4o-mini",
      temperature: 0.1,
      messages: [{ role: "system", content: "Answer in French." }],
    });
    expect(made.status).toBe(200);
    await goto("#/presets", "Presets");
    await page.getByRole("link", { name: "live-bot" }).waitFor();
    await page.getByLabel("Slug").fill("live-bot");
    await page.getByRole("button", { name: "Create preset" }).click();
    await page.getByRole("alert").filter({ hasText: "A preset named live-bot already exists; nothing was saved." }).waitFor();
    await page.locator("main").getByRole("link", { name: "open live-bot" }).waitFor();
    const after = await call("GET", "/presets/live-bot");
    expect(after.body.data.designated_version.version).toBe(1);
    expect(after.body.data.designated_version.config).toEqual({ model: "openai/gpt-4o-mini", temperature: 0.1 });
    expect((await call("GET", "/presets/live-bot/versions")).body.total_count).toBe(1);
  });

  it("a new version and a designation show the diff against the designated version and wait for a confirmation", async () => {
    await goto("#/presets/live-bot", "Preset live-bot");
    // The current configuration, read-only.
    const current = page.getByLabel("Configuration of version 1");
    expect(JSON.parse((await current.textContent()) ?? "")).toEqual({ model: "openai/gpt-4o-mini", temperature: 0.1 });
    await page.locator("pre.config").filter({ hasText: "Answer in French." }).waitFor();

    await page.getByLabel("Configuration (JSON)").fill('{"model": "openai/gpt-4o-mini", "temperature": 0.9}');
    await page.getByRole("button", { name: "Review changes" }).click();
    const review = page.getByRole("region", { name: "Create a new version and designate it?" });
    const diff = review.getByRole("table", { name: "Version 1 (designated) (left) and new version (right)" });
    await diff.waitFor();
    expect(await diff.locator("del").allTextContents()).toEqual(['    "temperature": 0.1']);
    expect(await diff.locator("ins").allTextContents()).toEqual(['    "temperature": 0.9']);
    // Nothing is saved by the review; Cancel leaves everything as it was.
    expect((await call("GET", "/presets/live-bot/versions")).body.total_count).toBe(1);
    await review.getByRole("button", { name: "Cancel" }).click();
    await review.waitFor({ state: "detached" });
    expect((await call("GET", "/presets/live-bot/versions")).body.total_count).toBe(1);

    // Someone else designates a new version between the review and the confirmation: asked again.
    await page.getByRole("button", { name: "Review changes" }).click();
    await review.getByRole("button", { name: "Confirm: create the version" }).waitFor();
    expect((await call("POST", "/presets/live-bot/chat/completions", { model: "openai/gpt-4o", messages: [{ role: "user", content: "x" }] })).status).toBe(200);
    await review.getByRole("button", { name: "Confirm: create the version" }).click();
    await page.getByRole("alert").filter({ hasText: "The designated version changed to version 2 while you reviewed" }).waitFor();
    await review.getByRole("table", { name: "Version 2 (designated) (left) and new version (right)" }).waitFor();
    expect((await call("GET", "/presets/live-bot/versions")).body.total_count).toBe(2);
    await review.getByRole("button", { name: "Confirm: create the version" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Version 3 created; it is now the designated version." }).waitFor();
    const v3 = (await call("GET", "/presets/live-bot")).body.data.designated_version;
    expect(v3.version).toBe(3);
    expect(v3.config).toEqual({ model: "openai/gpt-4o-mini", temperature: 0.9 });

    // Designating an older version shows what changes, and only a confirmation applies it.
    await page.getByRole("button", { name: "Designate version 1" }).click();
    const designate = page.getByRole("region", { name: "Designate version 1?" });
    const ddiff = designate.getByRole("table", { name: "Version 3 (designated) (left) and version 1 (right)" });
    await ddiff.waitFor();
    expect(await ddiff.locator("ins").allTextContents()).toContain('    "temperature": 0.1');
    expect((await call("GET", "/presets/live-bot")).body.data.designated_version.version).toBe(3);
    await designate.getByRole("button", { name: "Confirm: designate version 1" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Version 1 is now the designated version." }).waitFor();
    expect((await call("GET", "/presets/live-bot")).body.data.designated_version.version).toBe(1);
  });

  it("disabling a key asks first, and warns when it is the key the console is signed in with", async () => {
    const me = (await call("GET", "/key")).body.data;
    const other = (await call("GET", "/key", undefined, s.apiKey)).body.data;
    await goto("#/keys", "API keys");
    const mine = page.locator(`tr[data-hash="${me.hash}"]`);
    await mine.getByText("(signed in here)").waitFor();
    let message = "";
    page.once("dialog", (d) => {
      message = d.message();
      void d.dismiss();
    });
    await mine.getByRole("button", { name: /^Disable / }).click();
    await expect.poll(() => message, { timeout: 10_000 }).toContain("This is the key this console is signed in with: you will be signed out at once.");
    expect(message).toContain(`It is the organization's only enabled management key`);
    expect(message).toContain(`portico admin key enable ${me.hash}`);
    // Dismissed: nothing changed, still signed in.
    expect((await call("GET", "/key")).status).toBe(200);
    expect(await mine.getByText("enabled", { exact: true }).count()).toBe(1);

    // Another key: a plain confirmation, then disabled.
    const theirs = page.locator(`tr[data-hash="${other.hash}"]`);
    page.once("dialog", (d) => {
      message = d.message();
      void d.accept();
    });
    await theirs.getByRole("button", { name: /^Disable / }).click();
    await page.locator(`tr[data-hash="${other.hash}"]`).getByText("disabled", { exact: true }).waitFor();
    expect(message).toMatch(/^Disable the key .*\? Requests with it are refused at once\.$/);
    expect((await call("GET", "/key", undefined, s.apiKey)).status).toBe(401);
    await page.locator(`tr[data-hash="${other.hash}"]`).getByRole("button", { name: /^Enable / }).click();
    await page.locator(`tr[data-hash="${other.hash}"]`).getByText("enabled", { exact: true }).waitFor();
    expect((await call("GET", "/key", undefined, s.apiKey)).status).toBe(200);
  });

  /** Starts an intern run over the API and reads its stream until `until` appears in it (then, with `drop`, closes it). */
  const startRun = async (content: string, mode: "manual" | "self-drive", until: string, sessionId?: string) => {
    const controller = new AbortController();
    const res = await fetch(`${s.origin}/api/v1/interns/${s.internId}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ stream: true, approval_mode: mode, ...(sessionId ? { session_id: sessionId } : {}), messages: [{ role: "user", content }] }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes(until)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    const rest = (async () => {
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return text;
        text += value;
      }
    })();
    return { text: () => text, rest, drop: () => controller.abort() };
  };
  const liveSessions = async () => (await call("GET", `/interns/${s.internId}`)).body.sessions as { session_id: string; state: string }[];

  it("shows a paused run's question on the intern page, answers it from the chat, and stops paused and streaming runs", async () => {
    // A client starts a manual run and loses the stream at the question.
    const lost = await startRun("$ echo lost-question-1", "manual", '"finish_reason":"tool_calls"');
    lost.drop();
    await expect.poll(async () => (await liveSessions()).filter((x) => x.state === "paused").length, { timeout: 30_000 }).toBe(1);
    const paused = (await liveSessions()).find((x) => x.state === "paused")!;
    const question = (await call("GET", `/interns/${s.internId}/sessions/${paused.session_id}`)).body.pending_question;

    await goto(`#/interns/${s.internId}`, "Intern builtin");
    const row = page.locator(`tr[data-session="${paused.session_id}"]`);
    await row.getByText("paused", { exact: true }).waitFor();
    await row.getByText(`permission: ${question.arguments.operation}`).waitFor();
    await row.getByText(question.tool_call_id, { exact: true }).waitFor();
    await row.locator(`time[datetime="${question.deadline_at}"]`).waitFor();

    // Answered from the chat page the intern page links to.
    await row.getByRole("link", { name: `Answer the question of session ${paused.session_id} in the chat` }).click();
    await page.getByRole("heading", { level: 1, name: "Intern chat" }).waitFor();
    const card = page.getByRole("group", { name: /The intern asks permission/ });
    await card.getByRole("button", { name: "Allow once" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Finished" }).waitFor();
    await page.getByRole("log").getByText("lost-question-1").first().waitFor();

    // A second lost question, stopped from the intern page.
    const again = await startRun("$ echo lost-question-2", "manual", '"finish_reason":"tool_calls"', paused.session_id);
    again.drop();
    await expect.poll(async () => (await liveSessions()).some((x) => x.state === "paused"), { timeout: 30_000 }).toBe(true);
    await goto(`#/interns/${s.internId}`, "Intern builtin");
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: `Stop the run of session ${paused.session_id}` }).click();
    await page.locator("main").getByRole("status").filter({ hasText: `Stopped the run of session ${paused.session_id}.` }).waitFor();
    await page.getByText("No streaming or paused session.").waitFor();
    expect((await call("GET", `/interns/${s.internId}/sessions/${paused.session_id}`, undefined, s.apiKey)).body.state).toBe("idle");

    // A streaming run (a long command in self-drive mode), stopped from the intern page: its stream ends run_ended.
    const busy = await startRun("$ sleep 120", "self-drive", "data:");
    await expect.poll(async () => (await liveSessions()).some((x) => x.state === "streaming"), { timeout: 30_000 }).toBe(true);
    const streaming = (await liveSessions()).find((x) => x.state === "streaming")!;
    await page.getByRole("button", { name: "Refresh sessions" }).click();
    const srow = page.locator(`tr[data-session="${streaming.session_id}"]`);
    await srow.getByText("streaming", { exact: true }).waitFor();
    page.once("dialog", (d) => void d.accept());
    await srow.getByRole("button", { name: `Stop the run of session ${streaming.session_id}` }).click();
    await page.locator("main").getByRole("status").filter({ hasText: `Stopped the run of session ${streaming.session_id}.` }).waitFor();
    expect(await busy.rest).toContain("run_ended");
  });

  it("BYOK offers the providers that can serve requests, and shows each credential's routing flags", async () => {
    const providers = (await call("GET", "/providers")).body.data as { slug: string }[];
    await goto("#/byok", "BYOK credentials");
    await page.getByText("No credentials yet.").waitFor();
    const select = page.getByLabel("Provider");
    const offered = await select.locator("option").evaluateAll((os) => os.map((o) => (o as unknown as { value: string }).value).filter(Boolean));
    expect(offered).toEqual(providers.map((p) => p.slug));
    expect(offered).toContain("vllm");
    await select.locator("option", { hasText: "local — needs no key" }).waitFor({ state: "attached" });

    await select.selectOption("vllm");
    await page.getByLabel("Name").fill("gpu-box");
    await page.getByLabel("Key", { exact: true }).fill(`sk-${"c0ffee".repeat(8)}`);
    await page.getByLabel("Fallback").check();
    await page.getByRole("button", { name: "Store credential" }).click();
    const row = page.getByRole("row").filter({ hasText: "gpu-box" });
    await row.getByText("fallback: only after the provider's other keys").waitFor();
    await row.getByText("order 0").waitFor();
    const stored = (await call("GET", "/byok")).body.data.find((c: { name?: string }) => c.name === "gpu-box");
    expect(stored).toMatchObject({ provider: "vllm", is_fallback: true, is_required: false, is_byok_only: false });

    // The flags' rules are the API's: a fallback key cannot be required (400 naming the field).
    await select.selectOption("vllm");
    await page.getByLabel("Key", { exact: true }).fill(`sk-${"beef".repeat(12)}`);
    await page.getByLabel("Fallback").check();
    await page.getByLabel("Required").check();
    await page.getByRole("button", { name: "Store credential" }).click();
    await page.getByRole("alert").filter({ hasText: "is_required" }).waitFor();
  });

  it("a list being loaded says so instead of looking empty", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await page.route("**/api/v1/presets?*", async (route) => {
      await held;
      await route.continue();
    });
    try {
      await page.evaluate(`location.hash = "#/presets?loading"`);
      await page.locator("main").getByRole("status").filter({ hasText: "Loading presets…" }).waitFor();
      expect(await page.getByText("No presets yet.").count()).toBe(0);
      expect(await page.getByRole("table", { name: /Presets/ }).count()).toBe(0);
    } finally {
      release();
    }
    await page.getByRole("link", { name: "live-bot" }).waitFor();
    expect(await page.getByText("Loading presets…").count()).toBe(0);
    await page.unroute("**/api/v1/presets?*");
  });

  it("shows names instead of ids on the key page and in the audit log, whose filter matches the start of the action", async () => {
    const me = (await call("GET", "/key")).body.data;
    const workspaces = (await call("GET", "/workspaces")).body.data as { id: string; name: string }[];
    // The console knows users from the workspaces' member lists: the key's user is made a member.
    expect([200, 201]).toContain((await call("POST", `/workspaces/${me.workspace_id}/members/add`, { user_ids: [me.user_id] })).status);
    const members = (await call("GET", `/workspaces/${me.workspace_id}/members`)).body.data as { user_id: string; email: string }[];
    const keys = (await call("GET", "/keys?include_disabled=true")).body.data as { hash: string; name: string }[];
    const email = members.find((m) => m.user_id === me.user_id)!.email;
    const wsName = workspaces.find((w) => w.id === me.workspace_id)!.name;
    await goto("#/key", "Key");
    const facts = page.locator("dl.facts");
    await facts.getByText(wsName, { exact: false }).first().waitFor();
    await facts.getByText(email).waitFor();
    await facts.getByText(keys.find((k) => k.hash === me.hash)!.name, { exact: true }).waitFor();

    await goto("#/audit", "Audit log");
    await page.getByLabel("Action starts with").fill("key.");
    await page.getByRole("button", { name: "Filter" }).click();
    const table = page.getByRole("table", { name: "Audit events, newest first" });
    // The filtered page replaces the unfiltered one (or its loading row) once it arrives: wait for it.
    const actionCells = table.locator("tbody tr td:nth-child(2)");
    await expect
      .poll(async () => {
        const actions = await actionCells.allTextContents();
        return actions.length > 0 && actions.every((a) => a.startsWith("key."));
      }, { timeout: 15_000 })
      .toBe(true);
    // The API key disabled and enabled earlier: its name, not its hash; the actor by name and email.
    const apiKeyHash = (await call("GET", "/key", undefined, s.apiKey)).body.data.hash;
    const apiKey = keys.find((k) => k.hash === apiKeyHash)!;
    const row = table.locator("tbody tr").filter({ hasText: "key.update" }).first();
    await row.getByText(apiKey.name, { exact: true }).waitFor();
    expect(await row.textContent()).not.toContain(apiKey.hash);
    await row.getByText(email).waitFor();
    // Nothing starts with this: said plainly.
    await page.getByLabel("Action starts with").fill("nothing.");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByText("No events whose action starts with nothing.").waitFor();
  });

  it("presets of another workspace are reached with the workspace selector, and changed there", async () => {
    const made = await call("POST", "/workspaces", { name: "Second" });
    expect(made.status).toBe(201);
    const ws = made.body.data.id as string;
    expect((await call("POST", `/presets/second-bot/chat/completions?workspace_id=${ws}`, { model: "local/llama", temperature: 0.4, messages: [{ role: "user", content: "x" }] })).status).toBe(200);
    await goto("#/presets", "Presets");
    await page.getByRole("link", { name: "live-bot" }).waitFor();
    expect(await page.getByRole("link", { name: "second-bot" }).count()).toBe(0);
    await page.getByLabel("Workspace").selectOption({ label: "Second" });
    await page.getByRole("button", { name: "Show" }).click();
    await page.getByRole("link", { name: "second-bot" }).click();
    await page.getByRole("heading", { level: 1, name: "Preset second-bot" }).waitFor();
    expect(JSON.parse((await page.getByLabel("Configuration of version 1").textContent()) ?? "")).toEqual({ model: "local/llama", temperature: 0.4 });
    await page.getByLabel("Configuration (JSON)").fill('{"model": "local/llama", "temperature": 0.6}');
    await page.getByRole("button", { name: "Review changes" }).click();
    await page.getByRole("button", { name: "Confirm: create the version" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Version 2 created" }).waitFor();
    const after = (await call("GET", `/presets/second-bot?workspace_id=${ws}`)).body.data;
    expect(after.designated_version.config).toEqual({ model: "local/llama", temperature: 0.6 });
    expect((await call("GET", "/presets/second-bot")).status).toBe(404);
    // The list link keeps the workspace.
    await page.getByRole("link", { name: "All presets" }).click();
    await page.getByRole("link", { name: "second-bot" }).waitFor();
  });

  it("the playground streams a completion from a model or a preset, with the provider and the generation record", async () => {
    const from = local.requests.length;
    await page.getByRole("link", { name: "Playground", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Playground" }).waitFor();
    await page.getByLabel("Model or preset").fill("local/llama3.2");
    await page.getByLabel("Message", { exact: true }).fill("Say hello <b>bold</b>");
    await page.getByRole("button", { name: "Send" }).click();
    const answer = page.getByRole("region", { name: "Answer" });
    await answer.getByText("Hello, world").waitFor();
    await page.locator("main").getByText("Served by local").waitFor();
    const record = page.getByRole("region", { name: "Generation record" }).locator("dl");
    await record.waitFor();
    const terms = await record.locator("dt").allTextContents();
    const values = await record.locator("dd").allTextContents();
    const rec = Object.fromEntries(terms.map((k, i) => [k, values[i]]));
    expect(rec).toMatchObject({ Provider: "local", "Requested model": "local/llama3.2", Status: "success", Streamed: "true", "Finish reason": "stop" });
    const sent = local.requests.slice(from);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.body.stream).toBe(true);
    expect(sent[0]!.body.model).toBe("llama3.2");
    expect(sent[0]!.body.messages.at(-1)).toEqual({ role: "user", content: "Say hello <b>bold</b>" });

    // Through a preset (offered by the list GET /models makes), not streamed.
    expect((await call("POST", "/presets/play-bot/chat/completions", { model: "local/qwen", messages: [{ role: "system", content: "Be brief." }] })).status).toBe(200);
    await page.reload();
    await page.getByRole("heading", { level: 1, name: "Playground" }).waitFor();
    await page.locator('#playground-models option[value="@preset/play-bot"]').waitFor({ state: "attached" });
    await page.getByLabel("Model or preset").fill("@preset/play-bot");
    await page.getByLabel("Message", { exact: true }).fill("hi");
    await page.getByLabel("Stream the answer").uncheck();
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("region", { name: "Generation record" }).locator("dd").getByText("play-bot", { exact: true }).waitFor();
    await answer.getByText("Hello, world").waitFor();
    const viaPreset = local.requests.at(-1)!;
    expect(viaPreset.body.model).toBe("qwen");
    expect(viaPreset.body.messages[0]).toEqual({ role: "system", content: "Be brief." });

    // A refused request says why (the API's message), and leaves no record.
    await page.getByLabel("Model or preset").fill("gpt-4o-mini");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("alert").filter({ hasText: /^400: / }).waitFor();
  });

  it("no page logged an error or broke the Content-Security-Policy", () => {
    expect(b.problems).toEqual([]);
  });
});
