/**
 * The spend guarantee across instances (docs/limits.md): three core + gateway instances, each with its own
 * database connection pool, share one PostgreSQL database; eight concurrent requests on each (streamed and not,
 * real HTTP, a fake provider that reports usage and answers after a short delay so that reservations overlap)
 * against one key with a small limit, in two waves. The sum of the settled costs never exceeds the limit, equals
 * the sum of the generations' costs exactly, nothing stays reserved, and the requests that did not fit got 402.
 * A key's requests per minute hold across the three (rate-limiter-flexible in Redis).
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";
import { keyCounterId } from "../../../src/core/spend/spend-store.js";

interface Instance {
  url: string;
  close(): Promise<void>;
}

describe("spend limits across instances (postgresql)", () => {
  let h: Harness;
  let fake: FakeUpstream;
  const instances: Instance[] = [];

  beforeAll(async () => {
    fake = await startFakeOpenAI({ text: ["a", "b", "c"], finish: "stop", usage: { input: 10, output: 50 } }, { headerDelayMs: 30 });
    const catalogFile = writeCatalogFile([{ slug: "acme/tiny", name: "Acme Tiny", endpoints: [{ provider: "ollama", model_id: "tiny", context_length: 8192, max_completion_tokens: 1000, pricing: { prompt: "0.000001", completion: "0.000002" } }] }]);
    h = await startHarness({
      provider: "postgresql",
      env: {
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${fake.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        PORTICO_CATALOG_FILE: catalogFile,
        // Rates are shared through Redis across the instances (a prefix of this run's own).
        REDIS_URL: "redis://127.0.0.1:6379",
        PORTICO_REDIS_PREFIX: `portico-test-${randomUUID()}:`,
      },
    });
    instances.push({ url: h.baseUrl, close: async () => undefined });
    for (let i = 0; i < 2; i++) {
      const other = await startHarness({ sameDatabaseAs: h });
      instances.push({ url: other.baseUrl, close: () => other.close() });
    }
  });
  afterAll(async () => {
    for (const i of instances.reverse()) await i.close();
    await h?.close();
    await fake?.close();
  });

  async function request(base: string, key: string, stream: boolean): Promise<number> {
    const res = await fetch(`${base}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "ollama/tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 100, stream }),
    });
    const text = await res.text(); // the whole answer, the stream's last event included
    // A stream's answer may have begun (SSE headers and keepalives) before the refusal: it arrives in the stream.
    if (stream && res.status === 200 && text.includes('"spend_limit_exceeded"')) return 402;
    return res.status;
  }

  it("3 instances × 8 concurrent requests, two waves: settled spend ≤ limit and = the generations' costs", async () => {
    const limitUsd = 0.002;
    const created = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: "small", limit: limitUsd } });
    expect(created.status, created.text).toBe(201);
    const key: string = created.json.key;
    const hash: string = created.json.data.hash;
    const keyRow = (await h.database.db.apiKey.findUnique({ where: { hash } }))!;
    const statuses: number[] = [];
    for (let wave = 0; wave < 2; wave++) {
      const all = instances.flatMap((inst) => Array.from({ length: 8 }, (_, j) => request(inst.url, key, j % 2 === 1)));
      statuses.push(...(await Promise.all(all)));
    }
    const ok = statuses.filter((s) => s === 200).length;
    expect(ok).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 402).length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
    // Every request is recorded (the refused ones too).
    await waitFor("every generation recorded", async () => (await h.database.db.generation.count({ where: { keyHash: hash } })) === statuses.length);
    const gens = await h.database.db.generation.findMany({ where: { keyHash: hash } });
    const generationTotal = gens.reduce((s, g) => s + (g.costFemtoUsd ?? 0n), 0n);
    expect(gens.filter((g) => g.status === "success").length).toBe(ok);
    expect(generationTotal).toBe(BigInt(ok) * 110_000_000_000n);
    const counter = await waitFor("every reservation settled", async () => {
      const c = await h.database.db.spendCounter.findUnique({ where: { id: keyCounterId(keyRow.id) } });
      return c && c.reservedFemtoUsd === 0n ? c : undefined;
    });
    expect(counter.spentFemtoUsd).toBe(generationTotal);
    expect(counter.spentFemtoUsd <= BigInt(limitUsd * 1e15)).toBe(true);
    expect(await h.database.db.spendReservation.count()).toBe(0);
  });

  it("a key's requests per minute are one bound across the instances (Redis): the fourth request, on any instance, is 429", async () => {
    const created = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: "rpm", rate_limit_rpm: 3 } });
    expect(created.status, created.text).toBe(201);
    const key: string = created.json.key;
    for (const inst of instances) expect(await request(inst.url, key, false)).toBe(200);
    for (const inst of instances) {
      const res = await fetch(`${inst.url}/api/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "ollama/tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 10 }),
      });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(((await res.json()) as any).error.message).toMatch(/3 requests per minute/);
    }
  });
});
