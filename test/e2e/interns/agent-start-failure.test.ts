/**
 * An agent that cannot start: the client's 502 error chunk and the host's info-level log carry the reason, the
 * exit status and the tail of the agent's stderr (here a Node MODULE_NOT_FOUND), through the real
 * core, link and gateway with a real agent process.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { createInternHost, type InternHost } from "../../../src/host/link.js";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { chat, chatBody, createTestIntern } from "../../integration/interns/sse-client.js";

describe("agent start failure", () => {
  let h: Harness;
  let host: InternHost;
  let dir: string;
  let internId: string;
  const logs: string[] = [];

  beforeAll(async () => {
    h = await startHarness({ provider: "sqlite", env: { PORTICO_INTERN_START_TIMEOUT_MS: "20000" } });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    dir = mkdtempSync(join(tmpdir(), "portico-startfail-"));
    chmodSync(dir, 0o755);
    host = createInternHost({
      coreUrl: h.coreUrl,
      token,
      // A real process that dies the way an agent with a missing module does.
      profile: { command: process.execPath, args: [join(dir, "missing-agent", "index.js")], name: "broken" },
      workRoot: dir,
      runAs: null,
      bwrapPath: null,
      logger: pino({ level: "info" }, { write: (l: string) => void logs.push(l) }),
    });
    expect(await host.ready).toBe(internId);
  }, 60_000);
  afterAll(async () => {
    await host?.close();
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("ends the stream with a 502 error chunk naming the agent's exit and stderr tail, and logs it at info level", async () => {
    // The response opened (role chunk) when the core accepted the run; the failed start ends it.
    const r = await chat(h, internId, chatBody("hello"), { key: h.tenant.apiKey });
    expect(r.status).toBe(200);
    expect(r.chunks[0].choices[0].delta).toEqual({ role: "assistant" });
    const finish = r.chunks.find((c) => c.choices?.[0]?.finish_reason === "error");
    expect(finish.error).toMatchObject({ code: 502, metadata: { reason: "turn_failed" } });
    expect(r.done).toBe(true);
    const err = finish.error as { message: string };
    expect(err.message).toMatch(/exited with code 1/);
    expect(err.message).toContain("MODULE_NOT_FOUND");
    const entry = logs.map((l) => JSON.parse(l) as { level: number; msg: string; reason?: string }).find((l) => l.msg === "agent failed to start");
    expect(entry?.level).toBe(30);
    expect(entry?.reason).toContain("MODULE_NOT_FOUND");
  }, 60_000);
});
