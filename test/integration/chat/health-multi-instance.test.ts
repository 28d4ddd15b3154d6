/**
 * The health memory across instances (docs/routing.md, "The health memory"; docs/operations.md): two core +
 * gateway instances sharing PostgreSQL and Redis (a prefix of this run's own). A provider refuses instance A's
 * request with 429 and `Retry-After: 30`; the provider is healthy again, yet instance B — which never saw that
 * 429 — soon answers 429 with the provider's wait without calling it, because the cool-down reached it through
 * Redis. B's requests are polled (each either served, before the message arrived, or refused from the
 * cool-down), never slept on.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe("health memory across instances (postgresql, Redis)", () => {
  let h: Harness;
  let fake: FakeUpstream;
  let other: Harness | undefined;

  beforeAll(async () => {
    fake = await startFakeOpenAI({ text: ["fine"], finish: "stop", usage: { input: 1, output: 1 } });
    const env = {
      PORTICO_PROVIDER_MISTRAL_BASE_URL: `${fake.url}/v1`,
      REDIS_URL: "redis://127.0.0.1:6379",
      PORTICO_REDIS_PREFIX: `portico-test-${randomUUID()}:`,
    };
    h = await startHarness({ provider: "postgresql", env });
    expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "mistral", key: "ms-key" } })).status).toBe(200);
    // Instance B: its own core (and health memory) and gateway, on the same database and Redis.
    other = await startHarness({ sameDatabaseAs: h });
  });
  afterAll(async () => {
    await other?.close();
    await h?.close();
    await fake?.close();
  });

  const post = (base: string) =>
    fetch(`${base}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "mistral/m", messages: [{ role: "user", content: "hi" }] }),
    });

  it("a 429 with Retry-After on one instance cools the credential on the other, which then answers 429 without calling the provider", async () => {
    fake.knobs = { failStatus: 429, failMessage: "slow down", failHeaders: { "retry-after": "30" } };
    const first = await post(h.baseUrl);
    expect(first.status).toBe(429);
    expect(fake.requests).toHaveLength(1);
    fake.knobs = {}; // healthy again: B calling it would be served

    let served = 0;
    await expect
      .poll(
        async () => {
          const res = await post(other!.baseUrl);
          if (res.status === 200) served++; // sent before the cool-down's message reached B
          await res.text();
          return res.status === 429 ? Number(res.headers.get("retry-after")) : -res.status; // negative: not refused
        },
        { timeout: 10_000, interval: 20 },
      )
      .toBeGreaterThan(20); // the provider's wait (≤ 30 s), not a 1 s step of B's own
    // The refusal came from the cool-down: every call the provider received is accounted for.
    expect(fake.requests).toHaveLength(1 + served);
    const again = await post(other!.baseUrl);
    expect(again.status).toBe(429);
    expect(fake.requests).toHaveLength(1 + served);
  });
});
