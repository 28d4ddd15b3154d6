/**
 * The console's usage page (docs/console.md, "Usage") in Chromium against a real `portico serve`: generations
 * with known costs and tokens are written into its database, then the page's tables show exactly the daily
 * totals (split by model, API key and provider; 0.1 + 0.2 shown as 0.3, one femto-dollar as a plain decimal),
 * each chart draws one bar segment per non-zero table cell with the same value, the day before the window is
 * left out, the page fits a narrow screen and passes axe-core's WCAG checks, and nothing breaks the
 * Content-Security-Policy.
 */
import { createHash, randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/db/client.js";
import { CHROMIUM, launch, serve, signIn, stopServe, type Browser, type Served } from "./browser-stack.js";

const DAY = 86_400_000;
const day = (t: number) => new Date(t).toISOString().slice(0, 10);
const utcToday = () => {
  const n = new Date();
  return Date.UTC(n.getUTCFullYear(), n.getUTCMonth(), n.getUTCDate());
};
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

interface Rendered {
  title: string;
  segments: number;
  bars: Array<{ day: string; series: string; value: string }>;
  header: string[];
  rows: string[][];
}

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("console usage page in Chromium", { timeout: 90_000 }, () => {
  let s: Served;
  let b: Browser;
  let page: Page;
  let today: number;

  beforeAll(async () => {
    s = await serve();
    const me = (await (await fetch(`${s.origin}/api/v1/key`, { headers: { authorization: `Bearer ${s.managementKey}` } })).json()) as any;
    const keys = (await (await fetch(`${s.origin}/api/v1/keys?include_disabled=true`, { headers: { authorization: `Bearer ${s.managementKey}` } })).json()) as any;
    const org: string = me.data.organization_id;
    const workspace: string = me.data.workspace_id;
    expect(keys.data.map((k: any) => k.hash)).toEqual(expect.arrayContaining([sha256(s.managementKey), sha256(s.apiKey)]));
    today = utcToday();
    const D = (n: number) => today - n * DAY;
    const gens = [
      { at: D(0), key: sha256(s.managementKey), provider: "openai", model: "gpt-4o", cost: 100_000_000_000_000n, prompt: 100, completion: 50 },
      { at: D(0) + 1, key: sha256(s.managementKey), provider: "openai", model: "gpt-4o-2024-08-06", cost: 200_000_000_000_000n, prompt: 10, completion: 20 },
      { at: D(1), key: sha256(s.apiKey), provider: "anthropic", model: "claude-sonnet-4-20250514", cost: 1_500_000_000_000_000n, prompt: 1000, completion: 2000 },
      { at: D(3) + 1234, key: sha256(s.apiKey), provider: "groq", model: "llama-3.3-70b-versatile", cost: 1n, prompt: 3, completion: 4 },
      // The day before the window (30 days ending today): never shown.
      { at: D(30) + 5, key: sha256(s.apiKey), provider: "openai", model: "gpt-4o", cost: 9_000_000_000_000_000n, prompt: 9, completion: 9 },
    ];
    const database = await openDatabase({ dataDir: s.dataDir, migrate: false });
    try {
      await database.db.generation.createMany({
        data: gens.map((g) => ({
          id: `gen-${randomUUID()}`, organizationId: org, workspaceId: workspace, keyHash: g.key, requestedModel: `${g.provider}/${g.model}`,
          model: g.model, provider: g.provider, credentialSource: "shared", streamed: false, promptTokens: g.prompt, completionTokens: g.completion,
          totalTokens: g.prompt + g.completion, latencyMs: 3, status: "success", attempts: 1, createdAt: new Date(g.at),
          costFemtoUsd: g.cost, upstreamCostFemtoUsd: g.cost,
        })),
      });
    } finally {
      await database.close();
    }
    b = await launch();
    page = b.page;
    await signIn(page, s.origin, s.managementKey);
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await stopServe(s);
  });

  /** Each chart of the page: its bar segments and its table (header and rows), as text. */
  async function charts(by: string, heading: RegExp): Promise<Rendered[]> {
    await page.evaluate(`location.hash = ${JSON.stringify(`#/usage?by=${by}`)}`);
    await page.getByRole("heading", { level: 1, name: "Usage", exact: true }).waitFor();
    await page.getByRole("heading", { level: 2, name: heading }).first().waitFor();
    return (await page.evaluate(`[...document.querySelectorAll("main section.usage-chart")].map((sec) => ({
      title: sec.querySelector("h2").textContent,
      segments: Number(sec.querySelector("figure").dataset.segments),
      bars: [...sec.querySelectorAll("rect[data-series]")].map((r) => ({ day: r.dataset.day, series: r.dataset.series, value: r.dataset.value })),
      header: [...sec.querySelectorAll("thead th")].map((c) => c.textContent),
      rows: [...sec.querySelectorAll("tbody tr")].map((tr) => [...tr.children].map((c) => c.textContent)),
    }))`)) as Rendered[];
  }

  /** The non-zero cells of a table, as {day, column, value}. */
  const nonZero = (c: Rendered) =>
    c.rows.flatMap((r) => r.slice(1).map((v, i) => ({ day: r[0]!, column: c.header[i + 1]!, value: v }))).filter((x) => x.value !== "0");

  /** Every bar has the value of its table cell, and every non-zero cell has its bar. */
  function sameNumbers(c: Rendered, label: (series: string) => string): void {
    expect(c.segments).toBe(c.bars.length);
    expect(c.rows).toHaveLength(30);
    expect(c.rows[0]![0]).toBe(day(today - 29 * DAY));
    expect(c.rows[29]![0]).toBe(day(today));
    const bars = c.bars.map((x) => ({ day: x.day, column: label(x.series), value: x.value }));
    const sort = (xs: Array<{ day: string; column: string }>) => [...xs].sort((p, q) => `${p.day} ${p.column}`.localeCompare(`${q.day} ${q.column}`));
    expect(sort(bars)).toEqual(sort(nonZero(c)));
  }

  it("split by model: the tables hold the exact daily totals and each chart one bar per non-zero cell", async () => {
    const [cost, tokens] = await charts("model", /^Cost per day/);
    expect(utcToday(), "the test ran across UTC midnight; run it again").toBe(today);
    expect(cost!.header).toEqual(["Day (UTC)", "anthropic/claude-sonnet-4", "openai/gpt-4o", "meta-llama/llama-3.3-70b-instruct"]);
    expect(nonZero(cost!)).toEqual([
      { day: day(today - 3 * DAY), column: "meta-llama/llama-3.3-70b-instruct", value: "0.000000000000001" },
      { day: day(today - DAY), column: "anthropic/claude-sonnet-4", value: "1.5" },
      { day: day(today), column: "openai/gpt-4o", value: "0.3" },
    ]);
    sameNumbers(cost!, (x) => x);
    expect(nonZero(tokens!)).toEqual([
      { day: day(today - 3 * DAY), column: "meta-llama/llama-3.3-70b-instruct", value: "7" },
      { day: day(today - DAY), column: "anthropic/claude-sonnet-4", value: "3000" },
      { day: day(today), column: "openai/gpt-4o", value: "180" },
    ]);
    sameNumbers(tokens!, (x) => x);
    expect(cost!.bars).toHaveLength(3);
  });

  it("split by API key (by name) and by provider", async () => {
    const [cost, tokens] = await charts("key", /^Cost per day/);
    const keys = (await (await fetch(`${s.origin}/api/v1/keys?include_disabled=true`, { headers: { authorization: `Bearer ${s.managementKey}` } })).json()) as any;
    const nameOf = (hash: string) => keys.data.find((k: any) => k.hash === hash).name as string;
    const [ordinary, management] = [nameOf(sha256(s.apiKey)), nameOf(sha256(s.managementKey))];
    expect(cost!.header).toEqual(["Day (UTC)", ordinary, management]);
    expect(nonZero(cost!)).toEqual([
      { day: day(today - 3 * DAY), column: ordinary, value: "0.000000000000001" },
      { day: day(today - DAY), column: ordinary, value: "1.5" },
      { day: day(today), column: management, value: "0.3" },
    ]);
    sameNumbers(cost!, nameOf);
    sameNumbers(tokens!, nameOf);

    const [byProvider] = await charts("provider", /^Cost per day/);
    expect(byProvider!.header).toEqual(["Day (UTC)", "anthropic", "openai", "groq"]);
    expect(nonZero(byProvider!).map((x) => [x.column, x.value])).toEqual([
      ["groq", "0.000000000000001"],
      ["anthropic", "1.5"],
      ["openai", "0.3"],
    ]);
    sameNumbers(byProvider!, (x) => x);
    expect(utcToday(), "the test ran across UTC midnight; run it again").toBe(today);
  });

  it("fits a 360 px wide screen (charts shrink, tables scroll inside their own region)", async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    try {
      for (const by of ["model", "key", "provider"]) {
        const [cost] = await charts(by, /^Cost per day/);
        expect(cost!.bars.length).toBeGreaterThan(0);
        expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), by).toBe(true);
      }
    } finally {
      await page.setViewportSize({ width: 1200, height: 820 });
    }
  });

  it("passes axe-core's WCAG 2 A and AA checks, and broke no Content-Security-Policy", async () => {
    await charts("model", /^Cost per day/);
    const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
    await page.evaluate(axeSource);
    const result = (await page.evaluate(`axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
      .then((r) => ({ passes: r.passes.length, violations: r.violations.map((v) => v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(", ")) }))`)) as {
      passes: number;
      violations: string[];
    };
    expect(result.violations).toEqual([]);
    expect(result.passes).toBeGreaterThan(5);
    if (process.env["PORTICO_CONSOLE_SCREENSHOTS"]) await page.screenshot({ path: `${process.env["PORTICO_CONSOLE_SCREENSHOTS"]}/usage.png`, fullPage: true });
    expect(b.problems).toEqual([]);
  });
});
