/**
 * Each caller key has its own share of the runs an intern holds open across a question: one key that
 * leaves its questions unanswered gets 503 busy for itself, while another key still starts (and
 * pauses) runs. Default share: half of the host's paused-run limit; PORTICO_INTERN_MAX_PAUSED_PER_KEY
 * sets it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeHost, type FakeHost } from "./fake-host.js";
import { answerBody, chat, chatBody, contentOf, createTestIntern, finalOf, toolCallOf } from "./sse-client.js";

const ENV = {
  PORTICO_INTERN_START_TIMEOUT_MS: "2000",
  PORTICO_LINK_PING_INTERVAL_MS: "100",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "1500",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

describe.each([
  ["sqlite", {}, 4, 2],
  ["postgresql", {}, 4, 2],
  ["sqlite", { PORTICO_INTERN_MAX_PAUSED_PER_KEY: "1" }, 4, 1],
] as const)("per-key share of paused runs (%s %j, host holds %i)", (provider, extraEnv, hostPaused, share) => {
  let h: Harness;
  let host: FakeHost;
  let internId: string;
  let keyA: string;
  let keyB: string;

  beforeAll(async () => {
    h = await startHarness({ provider, env: { ...ENV, ...extraEnv } });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({ coreUrl: h.coreUrl, token, maxPausedRuns: hostPaused });
    await host.welcome;
    keyA = h.tenant.apiKey;
    const second = await h.identity.createApiKey({
      organizationId: h.tenant.organizationId,
      workspaceId: h.tenant.workspaceId,
      creatorUserId: h.tenant.userId,
      name: "second caller",
      isManagement: false,
    });
    keyB = second.plaintext;
  });
  afterAll(async () => {
    host?.kill();
    await h?.close();
  });

  it("one key's unanswered questions refuse only that key", async () => {
    const pausedA = [];
    for (let i = 0; i < share; i++) {
      const r = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key: keyA });
      expect(r.status, r.raw).toBe(200);
      pausedA.push({ call: toolCallOf(r.chunks), sessionId: finalOf(r.chunks).session_id });
    }
    const refused = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key: keyA });
    expect(refused.status).toBe(503);
    expect(refused.json.error).toMatchObject({ code: 503, metadata: { reason: "busy", retryable: true } });
    expect(refused.json.error.message).toMatch(/API key/);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);

    // Self-drive runs never pause: key A may still start them.
    const selfDrive = await chat(h, internId, chatBody("hello"), { key: keyA });
    expect(contentOf(selfDrive.chunks)).toBe("Hello world");

    // Key B is not refused: it gets its own share.
    const b = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key: keyB });
    expect(b.status, b.raw).toBe(200);
    expect(toolCallOf(b.chunks)).toBeDefined();

    // Once key A answers one question, it may pause a run again.
    const answered = await chat(h, internId, answerBody(pausedA[0]!.sessionId, pausedA[0]!.call.id, "allow_once"), { key: keyA });
    expect(answered.status).toBe(200);
    const again = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key: keyA });
    expect(again.status, again.raw).toBe(200);
  });
});
