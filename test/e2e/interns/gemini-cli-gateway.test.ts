/**
 * A real gemini-cli against Portico's Gemini dialect (docs/dialects.md, "Gemini"), with a fake Gemini upstream
 * behind Portico: `gemini -p` non-interactively with `GOOGLE_GEMINI_BASE_URL=<portico>/api` and a Portico key as
 * `GEMINI_API_KEY`. gemini-cli is the version pinned in test/agents (installed on first use, test/helpers/real-agents.ts).
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { ensureRealAgents } from "../../helpers/real-agents.js";

describe("gemini-cli through the Gemini dialect", () => {
  let h: Harness;
  let fake: FakeUpstream;
  let GEMINI: string;
  beforeAll(async () => {
    GEMINI = (await ensureRealAgents()).gemini;
    fake = await startFakeGemini({ text: ["Hello", " from", " fake"], finish: "STOP", usage: { input: 5, output: 3 } });
    h = await startHarness({ env: { PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${fake.url}/v1beta` } });
    expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "google-ai-studio", key: "AIza-test" } })).status).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  /** Runs `gemini <args>` in a fresh home and work directory; its exit code and JSON output. */
  async function gemini(args: string[]): Promise<{ code: number | null; out: any; stderr: string }> {
    const home = mkdtempSync(join(tmpdir(), "gemini-home-"));
    mkdirSync(join(home, ".gemini"));
    writeFileSync(join(home, ".gemini", "settings.json"), JSON.stringify({ security: { auth: { selectedType: "gemini-api-key" } } }));
    const work = mkdtempSync(join(tmpdir(), "gemini-work-"));
    return new Promise((resolve) => {
      const p = spawn(GEMINI, [...args, "--skip-trust", "--yolo", "-o", "json"], {
        cwd: work,
        env: { PATH: process.env.PATH, HOME: home, GEMINI_API_KEY: h.tenant.apiKey, GOOGLE_GEMINI_BASE_URL: `${h.baseUrl}/api`, GEMINI_CLI_NO_RELAUNCH: "true" },
      });
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (d) => (stdout += d));
      p.stderr.on("data", (d) => (stderr += d));
      p.on("exit", (code) => {
        let out: any;
        try {
          out = JSON.parse(stdout);
        } catch {
          out = stdout;
        }
        resolve({ code, out, stderr });
      });
    });
  }

  it("answers a prompt; a tool call and its result go round with the thought signature; every call is a gemini generation", async () => {
    fake.scripts = [
      { text: ["Let me look."], toolCalls: [{ id: "x", name: "list_directory", arguments: '{"dir_path":"."}' }], finish: "STOP", usage: { input: 5, output: 3 }, signature: "sig-cli" },
      { text: ["Done: it is empty."], finish: "STOP", usage: { input: 9, output: 4 } },
    ];
    const before = fake.requests.length;
    const run = await gemini(["-m", "gemini-2.5-flash", "-p", "what is here?"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.out.response).toBe("Done: it is empty.");
    const calls = fake.requests.slice(before);
    expect(calls.map((r) => r.url)).toEqual(Array(2).fill("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"));
    expect(calls[1]!.body.contents.at(-2)).toEqual({ role: "model", parts: [{ text: "Let me look." }, { functionCall: { name: "list_directory", args: { dir_path: "." } }, thoughtSignature: "sig-cli" }] });
    expect(calls[1]!.body.contents.at(-1).parts[0].functionResponse.name).toBe("list_directory");
    const gens = await api(h, "GET", "/generations?limit=10", { key: h.tenant.managementKey });
    expect(gens.json.data.slice(0, 2).map((g: any) => [g.model, g.status, g.dialect])).toEqual(Array(2).fill(["google/gemini-2.5-flash", "success", "gemini"]));
  }, 180_000);

  it("with its default model: the side calls with other model ids reach Google AI Studio through Portico too", async () => {
    fake.scripts = undefined;
    fake.script = { text: ["Hello", " from", " fake"], finish: "STOP", usage: { input: 5, output: 3 } };
    // gemini-cli's routing classifier asks generateContent for {reasoning, model_choice} JSON ("flash" or "pro").
    fake.scriptFor = (r) =>
      r.url.endsWith(":generateContent") ? { text: ['{"reasoning":"a short greeting","model_choice":"flash"}'], finish: "STOP", usage: { input: 4, output: 9 } } : undefined;
    const before = fake.requests.length;
    const run = await gemini(["-p", "hello"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.out.response).toBe("Hello from fake");
    const urls = fake.requests.slice(before).map((r) => r.url);
    // The routing classifier's generateContent call and the main streamed call.
    expect(urls.some((u) => /:generateContent$/.test(u))).toBe(true);
    expect(urls.filter((u) => u.endsWith(":streamGenerateContent?alt=sse"))).toHaveLength(1);
    const gens = await api(h, "GET", `/generations?limit=${urls.length}`, { key: h.tenant.managementKey });
    expect(gens.json.data.every((g: any) => g.status === "success" && g.dialect === "gemini")).toBe(true);
  }, 180_000);
});
