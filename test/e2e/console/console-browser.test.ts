/**
 * The web console in a real browser: Debian's Chromium driven by playwright-core against a real
 * `portico serve` (fresh SQLite data folder, embedded intern host with the built-in agent). Covers
 * sign-in (keyboard only), creating a preset version and seeing the diff, creating and rotating a
 * BYOK credential while only its masked label is ever on the page, and a manual-mode intern run that
 * pauses, is approved with a click and finishes. Every page is also checked on a narrow screen (no
 * horizontal overflow) and for Content-Security-Policy violations. Tests wait for selectors and
 * responses, never for time. Screenshots go to $PORTICO_CONSOLE_SCREENSHOTS when set (the ones in
 * docs/console were made that way), else to a temporary folder.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPortico } from "../../helpers/cli.js";
import { CHROMIUM, launch, serve, stopServe, type Browser, type Served } from "./browser-stack.js";

// Skipped only on a developer machine without Chromium; in CI (.ci/run installs it) a missing browser fails.
/** Every console page and its heading. */
const PAGES = (internId: string) =>
  [
    ["#/key", "Key"],
    ["#/keys", "API keys"],
    ["#/workspaces", "Workspaces"],
    ["#/audit", "Audit log"],
    ["#/presets", "Presets"],
    ["#/presets/support-bot", "Preset support-bot"],
    ["#/byok", "BYOK credentials"],
    ["#/playground", "Playground"],
    ["#/interns", "Interns"],
    [`#/interns/${internId}`, "Intern builtin"],
    [`#/interns/${internId}/chat`, "Intern chat"],
  ] as const;

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("web console in Chromium", { timeout: 90_000 }, () => {
  let dataDir: string;
  let shots: string;
  let s: Served;
  let b: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[];

  const shot = async (name: string, p: Page = page) => {
    await p.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  };
  /** The page's whole text and every form value: a secret must appear in none of them. */
  // Browser-side expressions are strings: this file is type-checked without the DOM library.
  const pageText = (p: Page = page): Promise<string> =>
    p.evaluate(`document.documentElement.outerHTML + [...document.querySelectorAll("input, textarea")].map((e) => e.value).join("\\n")`);
  const noHorizontalOverflow = (p: Page): Promise<boolean> => p.evaluate("document.documentElement.scrollWidth <= window.innerWidth");

  beforeAll(async () => {
    s = await serve();
    dataDir = s.dataDir;
    shots = process.env.PORTICO_CONSOLE_SCREENSHOTS ? resolve(process.env.PORTICO_CONSOLE_SCREENSHOTS) : join(dataDir, "shots");
    mkdirSync(shots, { recursive: true });
    // Expected on purpose: the sign-in test's refused key (401) and the chat test's cut answer request.
    b = await launch(["status of 401", "net::ERR_CONNECTION_RESET"]);
    ({ context, page, problems } = b);
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await stopServe(s);
  });

  it("signs in with the keyboard, refuses keys that are not management keys, and never shows the key", async () => {
    const res = await page.goto(`${s.origin}/console/`);
    expect(res!.headers()["content-security-policy"]).toContain("script-src 'self'");
    const key = page.getByLabel("Management key");
    const keyId = JSON.stringify(await key.getAttribute("id"));
    await expect.poll(() => page.evaluate(`document.activeElement === document.getElementById(${keyId})`), { timeout: 30_000 }).toBe(true);
    await shot("sign-in");

    await page.keyboard.type(s.apiKey);
    await page.keyboard.press("Enter");
    await page.getByRole("alert").filter({ hasText: "not a management key" }).waitFor();
    await key.fill(`pk-v1-${"0".repeat(64)}`);
    await page.keyboard.press("Enter");
    await page.getByRole("alert").filter({ hasText: "not accepted" }).waitFor();

    await key.fill(s.managementKey);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { level: 1, name: "Key" }).waitFor();
    await page.getByText("Hash (SHA-256)").waitFor();
    expect(await page.evaluate("document.activeElement?.tagName")).toBe("H1");
    expect(await pageText()).not.toContain(s.managementKey);
    expect(await page.evaluate("Object.values(sessionStorage)")).toEqual([s.managementKey]);
    expect(await page.evaluate("[Object.keys(localStorage).length, document.cookie]")).toEqual([0, ""]);
    await shot("key");
  });

  it("creates a preset, then a new version, and shows the two side by side", async () => {
    await page.getByRole("link", { name: "Presets", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Presets" }).waitFor();
    await page.getByText("No presets yet.").waitFor();
    await page.getByLabel("Slug").fill("support-bot");
    await page.getByLabel("System prompt").fill("You are helpful.");
    await page.getByLabel("Configuration (JSON)").fill('{"model": "openai/gpt-4o", "temperature": 0.7, "max_tokens": 512}');
    await page.getByRole("button", { name: "Create preset" }).click();
    await page.getByRole("heading", { level: 1, name: "Preset support-bot" }).waitFor();
    await page.getByText("A diff needs two versions").waitFor();

    // The new-version form starts from the designated version.
    const config = page.getByLabel("Configuration (JSON)");
    expect(JSON.parse(await config.inputValue())).toEqual({ model: "openai/gpt-4o", temperature: 0.7, max_tokens: 512 });
    expect(await page.getByLabel("System prompt").inputValue()).toBe("You are helpful.");
    await page.getByLabel("System prompt").fill("You are terse.");
    await config.fill('{"model": "openai/gpt-4o", "temperature": 0.2, "max_tokens": 512}');
    // Nothing replaces the designated version before its diff is shown and confirmed.
    await page.getByRole("button", { name: "Review changes" }).click();
    await page.getByRole("table", { name: "Version 1 (designated) (left) and new version (right)" }).waitFor();
    await page.getByRole("button", { name: "Confirm: create the version" }).click();

    const diff = page.getByRole("table", { name: "Version 1 (left) and version 2 (right)" });
    await diff.waitFor();
    await page.getByText("2 changed lines between version 1 and version 2.").waitFor();
    const changed = diff.locator("tr.diff-changed");
    expect(await changed.count()).toBe(2);
    // Keys are sorted at every level: config (max_tokens, model, temperature), then system_prompt.
    expect(await diff.locator("del").allTextContents()).toEqual(['    "temperature": 0.7', '  "system_prompt": "You are helpful."']);
    expect(await diff.locator("ins").allTextContents()).toEqual(['    "temperature": 0.2', '  "system_prompt": "You are terse."']);
    expect(await page.getByRole("table", { name: "Versions of support-bot, oldest first" }).getByRole("row").filter({ hasText: "openai/gpt-4o" }).count()).toBe(2);
    await shot("preset-diff");

    // The same comparison the other way round, chosen with the selects.
    await page.getByLabel("Left").selectOption("2");
    await page.getByLabel("Right").selectOption("1");
    await page.getByRole("button", { name: "Compare" }).click();
    await page.getByRole("table", { name: "Version 2 (left) and version 1 (right)" }).waitFor();

    // Management: designate the older version again, then describe and archive the preset.
    await page.getByRole("button", { name: "Designate version 1" }).click();
    await page.getByRole("button", { name: "Confirm: designate version 1" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Version 1 is now the designated version." }).waitFor();
    expect(JSON.parse(await page.getByLabel("Configuration (JSON)").inputValue()).temperature).toBe(0.7);
    await page.getByLabel("Description").fill("Answers support tickets");
    await page.getByLabel("Status", { exact: true }).selectOption("archived");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Settings saved." }).waitFor();
    await page.locator("dd").filter({ hasText: "Answers support tickets" }).waitFor();
    expect(await page.locator("dd").filter({ hasText: "archived" }).count()).toBe(1);

    await page.getByRole("link", { name: "All presets" }).click();
    await page.getByRole("link", { name: "support-bot" }).waitFor();
    await page.getByRole("row").filter({ hasText: "support-bot" }).getByText("archived").waitFor();
    await shot("presets");
  });

  it("stores a BYOK credential and rotates it; only masked labels are ever on the page", async () => {
    const secret = `sk-proj-${"a1b2c3d4".repeat(6)}XYZ9`;
    const rotated = `sk-proj-${"f9e8d7c6".repeat(6)}QRS7`;
    await page.getByRole("link", { name: "BYOK credentials", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "BYOK credentials" }).waitFor();
    await page.getByText("No credentials yet.").waitFor();
    await page.getByLabel("Provider").selectOption("openai");
    await page.getByLabel("Name").fill("prod");
    await page.getByLabel("Key", { exact: true }).fill(secret);
    const created = page.waitForResponse((r) => r.url().endsWith("/api/v1/byok") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Store credential" }).click();
    const label = (await (await created).json()).data.label as string;
    expect(label).not.toContain(secret);
    const row = page.getByRole("row").filter({ hasText: "prod" });
    await row.getByText(label, { exact: true }).waitFor();
    expect(await page.getByLabel("Key", { exact: true }).inputValue()).toBe("");
    const html = await pageText();
    expect(html).not.toContain(secret);
    expect(html).not.toContain(secret.slice(8, 40));
    await shot("byok");

    await row.getByRole("button", { name: "Rotate key of prod" }).click();
    await page.getByLabel("New key for prod").fill(rotated);
    const patched = page.waitForResponse((r) => r.request().method() === "PATCH");
    await page.getByRole("button", { name: "Rotate", exact: true }).click();
    const newLabel = (await (await patched).json()).data.label as string;
    await page.locator("main").getByText(`Rotated prod: now ${newLabel}.`).waitFor();
    await page.getByRole("row").filter({ hasText: "prod" }).getByText(newLabel, { exact: true }).waitFor();
    const after = await pageText();
    expect(after).not.toContain(secret);
    expect(after).not.toContain(rotated);
  });

  it("creates an API key whose plaintext is shown once, disables and deletes it", async () => {
    await page.getByRole("link", { name: "API keys", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "API keys" }).waitFor();
    await page.getByRole("row").filter({ hasText: "management" }).first().waitFor();
    await page.getByRole("textbox", { name: "Name", exact: true }).fill("ci-bot");
    const created = page.waitForResponse((r) => r.url().endsWith("/api/v1/keys") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Create key" }).click();
    const res = await (await created).json();
    expect(res.key).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    const once = page.getByRole("region", { name: "New key ci-bot" });
    await once.waitFor();
    expect(await once.getByLabel("Key", { exact: true }).inputValue()).toBe(res.key);
    const row = page.getByRole("row").filter({ hasText: "ci-bot" });
    await row.getByText(res.data.label, { exact: true }).waitFor();
    await once.getByRole("button", { name: "I have stored it" }).click();
    await once.waitFor({ state: "detached" });
    await shot("keys");
    expect(await pageText()).not.toContain(res.key);
    expect(await row.locator("td").nth(5).textContent()).toBe("none");

    // Limits set from the command line (portico admin key limits) show in the key's row.
    const limits = await runPortico(
      ["admin", "key", "limits", res.data.hash, "--limit", "5", "--reset", "monthly", "--rpm", "60", "--json"],
      { PORTICO_DATA_DIR: dataDir },
    );
    expect(limits.code, limits.stderr).toBe(0);
    expect(JSON.parse(limits.stdout)).toMatchObject({ limit: 5, limit_reset: "monthly", rate_limit_rpm: 60, expires_at: null });
    await page.reload();
    await page.getByRole("row").filter({ hasText: "ci-bot" }).getByText("$5 limit (monthly) · 60 req/min", { exact: true }).waitFor();

    page.once("dialog", (d) => void d.accept());
    await row.getByRole("button", { name: "Disable ci-bot" }).click();
    await page.getByRole("row").filter({ hasText: "ci-bot" }).getByText("disabled", { exact: true }).waitFor();
    // A disabled key is refused by the API at once.
    expect((await fetch(`${s.origin}/api/v1/key`, { headers: { authorization: `Bearer ${res.key}` } })).status).toBe(401);
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("row").filter({ hasText: "ci-bot" }).getByRole("button", { name: "Delete ci-bot" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Deleted ci-bot." }).waitFor();
    await page.getByRole("row").filter({ hasText: "ci-bot" }).waitFor({ state: "detached" });
  });

  it("creates a workspace, adds a member by email and removes them", async () => {
    await page.getByRole("link", { name: "Workspaces", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Workspaces" }).waitFor();
    await page.getByRole("textbox", { name: "Name", exact: true }).fill("Research");
    await page.getByRole("textbox", { name: "Slug", exact: true }).fill("research");
    await page.getByRole("button", { name: "Create workspace" }).click();
    await page.getByRole("heading", { level: 1, name: "Workspace Research" }).waitFor();
    await page.getByLabel("Email addresses or user ids").fill("ada@example.com");
    await page.getByRole("button", { name: "Add members" }).click();
    const member = page.getByRole("row").filter({ hasText: "ada@example.com" });
    await member.waitFor();
    await shot("workspace");
    await member.getByRole("button", { name: "Remove ada@example.com from Research" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "Removed ada@example.com." }).waitFor();
    await member.waitFor({ state: "detached" });

    // BYOK credentials are per workspace: the new one has none of the default workspace's.
    await page.getByRole("link", { name: "BYOK credentials", exact: true }).click();
    await page.getByRole("row").filter({ hasText: "prod" }).waitFor();
    await page.getByLabel("Workspace").selectOption({ label: "Research" });
    await page.getByRole("button", { name: "Show" }).click();
    await page.getByText("No credentials yet.").waitFor();

    await page.getByRole("link", { name: "Audit log", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Audit log" }).waitFor();
    await page.getByRole("cell", { name: "workspace.create" }).first().waitFor();
    await shot("audit");
  });

  it("streams a manual-mode run, pauses on the question with a countdown, and finishes after a click on Allow once", async () => {
    await page.getByRole("link", { name: "Interns", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Interns" }).waitFor();
    // The built-in intern's host (embedded in portico serve) is attached.
    const builtin = page.getByRole("row").filter({ has: page.getByRole("link", { name: "Chat with builtin" }) });
    await builtin.getByText(/^attached on /).waitFor();
    await shot("interns");
    await builtin.getByRole("link", { name: "Chat with builtin" }).click();
    await page.getByRole("heading", { level: 1, name: "Intern chat" }).waitFor();
    expect(await page.getByLabel("Approval mode").inputValue()).toBe("manual");
    await page.getByLabel("Message").fill("$ echo console-approved-run");
    await page.getByRole("button", { name: "Send" }).click();

    const question = page.getByRole("group", { name: /The intern asks permission/ });
    await question.waitFor();
    await page.locator("main").getByRole("status").filter({ hasText: "Paused: the intern is waiting for your answer" }).waitFor();
    // The card says what the agent asked to run: the command line of this permission request.
    expect(await question.locator("pre.tool-command").textContent()).toBe("echo console-approved-run");
    // Once: not again as raw JSON in the generic details line.
    expect(await question.getByText("console-approved-run").count()).toBe(1);
    const buttons = await question.getByRole("button").allTextContents();
    expect(buttons).toContain("Allow once");
    expect(buttons).toContain("Reject once");
    expect(buttons[buttons.length - 1]).toBe("Cancel the run");
    // The countdown shows minutes and seconds left of the 5-minute deadline.
    const countdown = question.locator("time.countdown");
    await expect.poll(async () => /^[0-5]:[0-5]\d$/.test((await countdown.textContent()) ?? ""), { timeout: 30_000 }).toBe(true);
    const [m, sec] = ((await countdown.textContent()) ?? "").split(":").map(Number);
    expect(m! * 60 + sec!).toBeGreaterThan(240);
    expect(m! * 60 + sec!).toBeLessThanOrEqual(300);
    // Focus moves to the first answer, so Enter answers from the keyboard as well.
    expect(await page.evaluate("document.activeElement?.textContent")).toBe(buttons[0]);
    await shot("intern-chat-paused");
    // A reload keeps the pending question (this tab's sessionStorage), so it can still be answered here.
    await page.reload();
    await question.getByRole("button", { name: "Allow once" }).waitFor();
    expect(await question.locator("pre.tool-command").textContent()).toBe("echo console-approved-run");
    await expect.poll(async () => /^[0-5]:[0-5]\d$/.test((await countdown.textContent()) ?? ""), { timeout: 30_000 }).toBe(true);

    // An answer that does not get through (connection reset) leaves the question pending: answer again.
    await page.route("**/api/v1/interns/*/chat/completions", (route) => route.abort("connectionreset"), { times: 1 });
    await question.getByRole("button", { name: "Allow once" }).click();
    await question.getByText("The answer was not delivered; the question is still waiting.").waitFor();
    expect(await question.getByRole("button", { name: "Allow once" }).isEnabled()).toBe(true);
    expect(await countdown.isVisible()).toBe(true);

    const answered = page.waitForRequest((r) => r.method() === "POST" && r.url().includes("/chat/completions") && (r.postData() ?? "").includes('"role":"tool"'));
    await question.getByRole("button", { name: "Allow once" }).click();
    const body = JSON.parse((await answered).postData()!);
    expect(body.messages.at(-1)).toMatchObject({ role: "tool", content: "allow_once" });
    expect(typeof body.session_id).toBe("string");
    await page.locator("main").getByRole("status").filter({ hasText: "Finished" }).waitFor();
    await page.getByRole("log").getByText("console-approved-run").first().waitFor();
    expect(await question.getByRole("button", { name: "Allow once" }).isDisabled()).toBe(true);
    expect(await countdown.isVisible()).toBe(false);
    await shot("intern-chat");
  });

  it("creates an intern whose host token is shown once, shows its host status and sessions, rotates and revokes the token", async () => {
    await page.getByRole("link", { name: "Interns", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Interns" }).waitFor();
    await page.getByRole("textbox", { name: "Name", exact: true }).fill("helper");
    await page.getByLabel("Instructions").fill("Keep answers short.");
    const created = page.waitForResponse((r) => r.url().endsWith("/api/v1/interns") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Create intern" }).click();
    const intern = await (await created).json();
    expect(intern.host_token).toMatch(/^pht-v1-[0-9a-f]{64}$/);
    const once = page.getByRole("region", { name: "Host token of helper" });
    expect(await once.getByLabel("Host token", { exact: true }).inputValue()).toBe(intern.host_token);
    await once.getByRole("button", { name: "I have stored it" }).click();
    await once.waitFor({ state: "detached" });
    expect(await pageText()).not.toContain(intern.host_token);
    await page.getByRole("row").filter({ hasText: "helper" }).getByText("no host attached").waitFor();

    await page.getByRole("link", { name: "helper", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Intern helper" }).waitFor();
    await page.getByText("No streaming or paused session.").waitFor();
    expect(await page.getByLabel("Instructions").inputValue()).toBe("Keep answers short.");
    await shot("intern");
    const rotated = page.waitForResponse((r) => r.url().endsWith("/host-token") && r.request().method() === "POST");
    await page.getByRole("button", { name: "Rotate the host token" }).click();
    const token = (await (await rotated).json()).host_token as string;
    expect(token).toMatch(/^pht-v1-[0-9a-f]{64}$/);
    expect(token).not.toBe(intern.host_token);
    await page.getByRole("region", { name: "Host token of helper" }).getByRole("button", { name: "I have stored it" }).click();
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Revoke the host token" }).click();
    await page.locator("main").getByRole("status").filter({ hasText: "The host token was revoked." }).waitFor();
    expect(await pageText()).not.toContain(token);
  });

  it("hides the Interns section from an organization outside the interns programme", async () => {
    const made = await runPortico(["admin", "org", "create", "--name", "Outside", "--json"], { PORTICO_DATA_DIR: dataDir });
    expect(made.code, made.stderr).toBe(0);
    const outsideKey = JSON.parse(made.stdout).management_key as string;
    const other = await context.newPage();
    await other.goto(`${s.origin}/console/`);
    await other.getByLabel("Management key").fill(outsideKey);
    await other.keyboard.press("Enter");
    await other.getByRole("heading", { level: 1, name: "Key" }).waitFor();
    const nav = other.getByRole("navigation", { name: "Console sections" });
    await nav.getByRole("link", { name: "Interns", exact: true }).waitFor({ state: "hidden" });
    await nav.getByRole("link", { name: "Presets", exact: true }).waitFor();
    await other.close();
  });

  it("every page passes axe-core's WCAG 2 A and AA checks", async () => {
    // Evaluated through the DevTools protocol (not a <script> tag), so the page's CSP stays in force.
    const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
    for (const [hash, heading] of PAGES(s.internId)) {
      await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
      await page.getByRole("heading", { level: 1, name: heading, exact: true }).waitFor();
      await page.locator("main").locator("table, form, dl").first().waitFor();
      await page.evaluate(axeSource);
      const result = (await page.evaluate(`axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
        .then((r) => ({ passes: r.passes.length, violations: r.violations.map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")) }))`)) as {
        passes: number;
        violations: string[];
      };
      expect(result.violations, hash).toEqual([]);
      expect(result.passes, hash).toBeGreaterThan(5);
    }
  });

  it("every page fits a narrow screen, and no page broke the Content-Security-Policy or logged an error", async () => {
    const narrow = await context.newPage();
    await narrow.setViewportSize({ width: 360, height: 740 });
    await narrow.goto(`${s.origin}/console/#/key`);
    // sessionStorage is per tab: the new tab signs in again.
    await narrow.getByLabel("Management key").fill(s.managementKey);
    await narrow.keyboard.press("Enter");
    for (const [hash, heading] of PAGES(s.internId)) {
      await narrow.evaluate(`location.hash = ${JSON.stringify(hash)}`);
      await narrow.getByRole("heading", { level: 1, name: heading, exact: true }).waitFor();
      await narrow.locator("main").locator("table, form, dl").first().waitFor();
      expect(await noHorizontalOverflow(narrow), hash).toBe(true);
    }
    await shot("narrow-intern-chat", narrow);
    // Signing out forgets the key: the tab's storage is empty and the sign-in form is back.
    await narrow.getByRole("button", { name: "Sign out" }).click();
    await narrow.getByLabel("Management key").waitFor();
    expect(await narrow.evaluate("sessionStorage.length")).toBe(0);
    expect(await narrow.getByRole("navigation", { name: "Console sections" }).isVisible()).toBe(false);
    await narrow.close();
    expect(problems).toEqual([]);
  });
});
