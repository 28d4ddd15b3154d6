/**
 * Sticky sessions across instances (docs/routing.md, "Sticky sessions"): two core + gateway instances sharing
 * PostgreSQL and Redis (a prefix of this run's own), four BYOK credentials of one provider drawn by weight
 * ("balanced"). A session's first request is served by one of them; every later request of the session, through
 * either instance and whichever session header names it (`x-session-id`, Claude Code's, Codex's, the body's
 * `session_id`), goes to the same credential. Requests through the `openai` client; the provider is a fake.
 */
import { randomUUID } from "node:crypto";
import OpenAI from "openai";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

describe("sticky sessions across instances (postgresql, Redis)", () => {
  let h: Harness;
  let fake: FakeUpstream;
  let other: Harness | undefined;
  let redis: Redis;
  const prefix = `portico-test-${randomUUID()}:`;

  beforeAll(async () => {
    fake = await startFakeOpenAI({ text: ["fine"], finish: "stop", usage: { input: 1, output: 1 } });
    const env = {
      PORTICO_PROVIDER_MISTRAL_BASE_URL: `${fake.url}/v1`,
      REDIS_URL: "redis://127.0.0.1:6379",
      PORTICO_REDIS_PREFIX: prefix,
      PORTICO_CREDENTIAL_ORDER: "balanced",
    };
    h = await startHarness({ provider: "postgresql", env });
    for (let i = 0; i < 4; i++) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "mistral", key: `ms-key-${i}`, weight: 1 + i } });
      expect(res.status).toBe(200);
    }
    other = await startHarness({ sameDatabaseAs: h });
    redis = new Redis("redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    redis?.disconnect();
    await other?.close();
    await h?.close();
    await fake?.close();
  });

  const client = (base: string, headers: Record<string, string> = {}) =>
    new OpenAI({ baseURL: `${base}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0, defaultHeaders: headers });
  /** Sends one request and returns the provider key it reached the fake with. */
  const keyUsed = async (c: OpenAI, body: Record<string, unknown> = {}): Promise<string> => {
    const before = fake.requests.length;
    const res = await c.chat.completions.create({ model: "mistral/m", messages: [{ role: "user", content: "hi" }], ...body } as never);
    expect((res as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe("fine");
    expect(fake.requests.length).toBe(before + 1);
    return String(fake.requests.at(-1)!.headers.authorization).replace(/^Bearer /, "");
  };
  /** Waits (polling Redis) until this run has `n` pins stored. */
  const pinsStored = (n: number) => waitFor(`${n} sticky pin(s) in Redis`, async () => (await redis.keys(`${prefix}sticky:*`)).length >= n);

  it("the weight is stored and shown; out of range is a 400 naming it", async () => {
    const list = await api(h, "GET", "/byok", { key: h.tenant.managementKey });
    expect((list.json as { data: Array<{ weight: number }> }).data.map((c) => c.weight).sort()).toEqual([1, 2, 3, 4]);
    const bad = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "mistral", key: "ms-x", weight: 0 } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("weight");
  });

  it("a session stays on its credential through both instances, whichever header names it", async () => {
    const session = randomUUID();
    const first = await keyUsed(client(h.baseUrl, { "x-claude-code-session-id": session }));
    await pinsStored(1);
    for (const [base, headers, body] of [
      [other!.baseUrl, { "x-claude-code-session-id": session }, {}],
      [other!.baseUrl, { "x-session-id": session }, {}],
      [h.baseUrl, { "session-id": session }, {}],
      [other!.baseUrl, {}, { session_id: session }],
      [h.baseUrl, { session_id: session }, {}],
    ] as Array<[string, Record<string, string>, Record<string, unknown>]>) {
      expect(await keyUsed(client(base, headers), body)).toBe(first);
    }
    // The Responses dialect reads the same headers (Codex sends `session_id`).
    for (const base of [h.baseUrl, other!.baseUrl, h.baseUrl, other!.baseUrl, h.baseUrl, other!.baseUrl]) {
      const before = fake.requests.length;
      const res = await client(base, { session_id: session }).responses.create({ model: "mistral/m", input: "hi" });
      expect(res.output_text).toBe("fine");
      expect(fake.requests.length).toBe(before + 1);
      expect(String(fake.requests.at(-1)!.headers.authorization).replace(/^Bearer /, "")).toBe(first);
    }
    // Without a session the draw spreads: 40 requests reach more than one credential.
    const seen = new Set<string>();
    for (let i = 0; i < 40 && seen.size < 2; i++) seen.add(await keyUsed(client(other!.baseUrl)));
    expect(seen.size).toBeGreaterThan(1);
  });
});
