/**
 * SIGTERM to `portico serve` never cuts an open stream with a connection reset: each chat and intern
 * stream either runs to its end within the drain part of PORTICO_SHUTDOWN_TIMEOUT_MS, or ends in band
 * (a chunk with `finish_reason: "error"` and `data: [DONE]`). A real server process against fake
 * providers with slow streams; the test waits for events (chunks, exit), never sleeps.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { serveWithBanner } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

const GRACE_MS = 6_000;

const dirs: string[] = [];
const fakes: FakeUpstream[] = [];
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await Promise.all(fakes.map((f) => f.close()));
});

async function serve(env: Record<string, string>): Promise<{ child: ChildProcess; base: string; key: string; intern: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), "portico-stop-streams-"));
  dirs.push(dataDir);
  const s = await serveWithBanner({ PORTICO_DATA_DIR: dataDir, PORTICO_SHUTDOWN_TIMEOUT_MS: String(GRACE_MS), ...env });
  return { child: s.child, base: s.base, key: s.managementKey, intern: s.internId };
}

/** An open SSE response: `until` reads up to a point, `rest` reads to the end (rejecting on a reset). */
function reader(res: Response) {
  const r = res.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  return {
    async until(pred: (t: string) => boolean): Promise<string> {
      while (!pred(text)) {
        const { value, done } = await r.read();
        if (done) break;
        text += dec.decode(value, { stream: true });
      }
      return text;
    },
    async rest(): Promise<string> {
      for (;;) {
        const { value, done } = await r.read();
        if (done) return text;
        text += dec.decode(value, { stream: true });
      }
    },
  };
}

describe("SIGTERM during open streams", () => {
  it("ends every chat and intern stream in band or lets it finish, never with a reset", async () => {
    // 400 pieces 50 ms apart: far longer than the shutdown budget. 6 pieces 100 ms apart: ends within it.
    const slow = await startFakeOpenAI({ text: Array.from({ length: 400 }, (_, i) => `s${i} `), finish: "stop", usage: { input: 1, output: 400 } }, { chunkDelayMs: 50 });
    const short = await startFakeOpenAI({ text: Array.from({ length: 6 }, (_, i) => `q${i} `), finish: "stop", usage: { input: 1, output: 6 } }, { chunkDelayMs: 100 });
    fakes.push(slow, short);
    const s = await serve({ PORTICO_PROVIDER_GROQ_BASE_URL: `${slow.url}/v1`, PORTICO_PROVIDER_TOGETHER_BASE_URL: `${short.url}/v1` });
    const headers = { authorization: `Bearer ${s.key}`, "content-type": "application/json" };
    for (const [provider, key] of [["groq", "gsk-slow"], ["together", "tg-short"]]) {
      const res = await fetch(`${s.base}/byok`, { method: "POST", headers, body: JSON.stringify({ provider, key }) });
      expect(res.status).toBe(200);
    }
    const chat = (model: string) =>
      fetch(`${s.base}/chat/completions`, { method: "POST", headers, body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "hi" }] }) });

    const slowStreams = await Promise.all(Array.from({ length: 12 }, () => chat("groq/m").then(reader)));
    const intern = reader(
      await fetch(`${s.base}/interns/${s.intern}/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({ stream: true, messages: [{ role: "user", content: "$ sleep 600" }] }),
      }),
    );
    await Promise.all(slowStreams.map((r) => r.until((t) => t.includes('"content":"s0 "'))));
    await intern.until((t) => t.includes("sleep"));
    const shortStream = reader(await chat("together/m"));
    await shortStream.until((t) => t.includes('"content":"q0 "'));

    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => s.child.once("exit", (code, signal) => resolve({ code, signal })));
    s.child.kill("SIGTERM");

    // A reset rejects rest(); every stream must end with [DONE].
    const [slowTexts, internText, shortText] = await Promise.all([Promise.all(slowStreams.map((r) => r.rest())), intern.rest(), shortStream.rest()]);
    for (const text of slowTexts) {
      expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
      expect(text).toContain('"finish_reason":"error"');
      expect(text).toContain('"code":503');
      expect(text).not.toContain('"content":"s399 "');
    }
    expect(shortText).toContain('"content":"q5 "');
    expect(shortText).toContain('"finish_reason":"stop"');
    expect(shortText.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(internText).toContain('"finish_reason":"error"');
    expect(internText).toContain('"session_id"');
    expect(internText.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(await exited).toEqual({ code: 0, signal: null });
  });
});
