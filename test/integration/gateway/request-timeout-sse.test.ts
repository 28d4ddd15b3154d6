/**
 * The request timeout limits receiving a request, never the response: an intern SSE stream stays open
 * well past PORTICO_REQUEST_TIMEOUT_MS and completes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeHost, MODEL, type FakeHost } from "../interns/fake-host.js";
import { chat, chatBody, contentOf, createTestIntern } from "../interns/sse-client.js";

const TIMEOUT_MS = 300;

describe("request timeout and long responses", () => {
  let h: Harness;
  let host: FakeHost;
  let internId = "";
  let runId: string | undefined;
  beforeAll(async () => {
    h = await startHarness({ env: { PORTICO_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS), PORTICO_INTERN_RATE_LIMIT: "1000" } });
    const intern = await createTestIntern(h);
    internId = intern.internId;
    host = startFakeHost({
      coreUrl: h.coreUrl,
      token: intern.token,
      onStart: (run, fake) => {
        runId = run.start.runId;
        fake.emit(runId, { case: "started", value: {} as never });
        fake.emit(runId, { case: "model", value: { model: MODEL } as never });
        fake.emit(runId, { case: "content", value: { text: "first" } as never });
        return true;
      },
    });
    await host.welcome;
  });
  afterAll(async () => {
    host?.kill();
    await h?.close();
  });

  it("keeps an SSE stream open past the request timeout", async () => {
    let resumed = false;
    const result = await chat(h, internId, chatBody("long"), {
      key: h.tenant.apiKey,
      onChunk: (chunk) => {
        if (resumed || !JSON.stringify(chunk).includes("first")) return;
        resumed = true;
        // Several request timeouts (and Node's 1 s connection checks) pass before the run goes on.
        setTimeout(() => {
          host.emit(runId!, { case: "content", value: { text: " second" } as never });
          host.emit(runId!, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
        }, TIMEOUT_MS * 4 + 1_200);
      },
    });
    expect(result.status).toBe(200);
    expect(result.done).toBe(true);
    expect(contentOf(result.chunks)).toBe("first second");
  });
});
