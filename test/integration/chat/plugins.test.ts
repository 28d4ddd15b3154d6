/**
 * plugins[] on POST /api/v1/chat/completions (docs/plugins.md), end to end with the `openai` client against the
 * fake OpenAI upstream, on SQLite and PostgreSQL: a plugin the deployment does not implement is refused with 400
 * naming `plugins[i].id` and nothing is sent upstream (from the request, from a preset, over gRPC).
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { startFakeModeration, type FakeModeration } from "../../helpers/fake-upstreams/moderation.js";
import { waitFor } from "../../helpers/wait.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

/** google.protobuf.Struct as proto-loader represents it. */
const value = (v: unknown): unknown =>
  typeof v === "string" ? { stringValue: v }
  : typeof v === "number" ? { numberValue: v }
  : typeof v === "boolean" ? { boolValue: v }
  : Array.isArray(v) ? { listValue: { values: v.map(value) } }
  : { structValue: struct(v as Record<string, unknown>) };
const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });

describe.each(["sqlite", "postgresql"] as const)("plugins (%s)", (provider) => {
  let h: Harness;
  let upstream: FakeUpstream;
  let moderation: FakeModeration;
  let client: OpenAI;

  beforeAll(async () => {
    upstream = await startFakeOpenAI();
    moderation = await startFakeModeration();
    // A self-hosted model with a small context (300 tokens) for context-compression.
    const catalogFile = writeCatalogFile([{ slug: "acme/tiny", name: "Acme Tiny", endpoints: [{ provider: "ollama", model_id: "tiny", context_length: 300, pricing: { prompt: "0.000001", completion: "0.000002" } }] }]);
    h = await startHarness({
      provider,
      env: {
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${upstream.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        PORTICO_CATALOG_FILE: catalogFile,
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${upstream.url}/v1`,
        PORTICO_MODERATION_BASE_URL: `${moderation.url}/v1`,
        PORTICO_MODERATION_API_KEY: "sk-mod-secret",
      },
    });
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "openai", key: "sk-test" } });
    expect(res.status, res.text).toBe(200);
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
    await moderation?.close();
  });

  const messages = [{ role: "user" as const, content: "hi" }];
  /** The generation's `plugins` (GET /api/v1/generation), once it is recorded. */
  const recorded = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return got.status === 200 ? (got.json.data.plugins as Array<Record<string, unknown>>) : undefined;
    });

  describe("a plugin this deployment does not implement", () => {
    it("is refused with 400 naming plugins[i].id, streaming or not, nothing sent upstream", async () => {
      const before = upstream.requests.length;
      for (const stream of [false, true]) {
        const err = await client.chat.completions
          .create({ model: "openai/gpt-4o", messages, stream, plugins: [{ id: "switchyard-router" }] } as never)
          .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
        expect(err?.status).toBe(400);
        expect(err?.message).toContain('plugins[0].id "switchyard-router" is not supported by this deployment');
        expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].id");
      }
      expect(upstream.requests.length).toBe(before);
    });

    it("switched off (enabled: false) is not run and not refused", async () => {
      const res = await client.chat.completions.create({ model: "openai/gpt-4o", messages, plugins: [{ id: "web", enabled: false }] } as never);
      expect(res.choices[0]!.message.content).toBe("Hello, world");
    });

    it("from a preset: refused the same way, the message says the preset set it", async () => {
      const created = await api(h, "POST", "/presets/with-fusion/chat/completions", {
        key: h.tenant.managementKey,
        body: { model: "openai/gpt-4o", messages, plugins: [{ id: "switchyard-router" }] },
      });
      expect(created.status, created.text).toBe(200);
      const before = upstream.requests.length;
      const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "@preset/with-fusion", messages } });
      expect(res.status).toBe(400);
      expect(res.json.error.metadata.field).toBe("plugins[0].id");
      expect(res.json.error.message).toContain('after preset "with-fusion" was applied');
      expect(upstream.requests.length).toBe(before);
    });

    it("over gRPC: INVALID_ARGUMENT naming the field", async () => {
      const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
      const body = struct({ model: "openai/gpt-4o", messages, plugins: [{ id: "switchyard-router" }] });
      const err = await new Promise<any>((resolve) => chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (e: unknown) => resolve(e)));
      expect(err?.code).toBe(3);
      expect(String(err?.details)).toContain('plugins[0].id "switchyard-router" is not supported');
    });
  });

  describe("response-healing", () => {
    const almost = ["Here you go:\n```json\n{'name': 'Ada',", " \"age\": 36,}\n```", "\nAnything else?"];
    const schema = { type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name", "age"] };
    const healing = { plugins: [{ id: "response-healing" }], response_format: { type: "json_schema", json_schema: { name: "person", schema } } };
    type Reported = { plugins?: Array<Record<string, unknown>> };

    it("non-streaming: the almost-JSON answer comes back as JSON matching the schema, reported healed", async () => {
      upstream.script = { text: almost, finish: "stop", usage: { input: 5, output: 9 } };
      try {
        const res = await client.chat.completions.create({ model: "openai/gpt-4o", messages, ...healing } as never);
        expect(JSON.parse(res.choices[0]!.message.content!)).toEqual({ name: "Ada", age: 36 });
        expect((res as unknown as Reported).plugins).toEqual([{ id: "response-healing", healed: true, valid: true, actions: ["extracted", "repaired"] }]);
        expect(await recorded(res.id)).toEqual([{ id: "response-healing", healed: true, valid: true, actions: ["extracted", "repaired"] }]);
        // the request log filters by the plugins that ran
        const listed = await api(h, "GET", "/generations?plugin=response-healing&limit=100", { key: h.tenant.apiKey });
        expect(listed.status, listed.text).toBe(200);
        expect(listed.json.data.map((g: { id: string }) => g.id)).toContain(res.id);
        expect(listed.json.data.every((g: { plugins: Array<{ id: string }> }) => g.plugins.some((p) => p.id === "response-healing"))).toBe(true);
        // the upstream got the request without plugins (a gateway field)
        expect(upstream.requests.at(-1)!.body.plugins).toBeUndefined();
      } finally {
        upstream.script = defaultScript();
      }
    });

    it("streaming: the content is held, healed and sent as one chunk before the finish chunk; usage last", async () => {
      upstream.script = { text: almost, finish: "stop", usage: { input: 5, output: 9 } };
      try {
        const stream = await client.chat.completions.create({ model: "openai/gpt-4o", messages, stream: true, stream_options: { include_usage: true }, ...healing } as never);
        const contents: string[] = [];
        let finishedAt = -1;
        let usageAt = -1;
        let reported: Reported["plugins"];
        let id = "";
        let i = 0;
        for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & Reported>) {
          const c = chunk.choices[0]?.delta?.content;
          if (c) contents.push(c);
          if (chunk.choices[0]?.finish_reason) {
            finishedAt = i;
            reported = chunk.plugins;
          }
          if (chunk.usage) usageAt = i;
          id = chunk.id;
          i++;
        }
        expect(contents.length).toBe(1);
        expect(JSON.parse(contents[0]!)).toEqual({ name: "Ada", age: 36 });
        expect(finishedAt).toBeGreaterThan(0);
        expect(usageAt).toBeGreaterThan(finishedAt);
        expect(reported).toEqual([expect.objectContaining({ id: "response-healing", healed: true, valid: true, held_ms: expect.any(Number) })]);
        expect(await recorded(id)).toEqual(reported);
      } finally {
        upstream.script = defaultScript();
      }
    });

    it("streaming: the cost is time to first content — the role chunk comes at once, the text only after the whole answer", async () => {
      upstream.script = { text: almost, finish: "stop", usage: { input: 5, output: 9 } };
      upstream.knobs.chunkDelayMs = 60;
      try {
        const stream = await client.chat.completions.create({ model: "openai/gpt-4o", messages, stream: true, ...healing } as never);
        let firstChunkAt: number | undefined;
        let firstContentAt: number | undefined;
        let reported: Reported["plugins"];
        for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & Reported>) {
          firstChunkAt ??= performance.now();
          if (chunk.choices[0]?.delta?.content) firstContentAt ??= performance.now();
          reported ??= chunk.plugins;
        }
        // three text chunks and the finish chunk, 60 ms apart, arrive upstream after the role chunk: the text waits for all of them
        expect(firstContentAt! - firstChunkAt!).toBeGreaterThanOrEqual(150);
        expect(reported![0]!.held_ms).toBeGreaterThanOrEqual(100);
      } finally {
        upstream.knobs.chunkDelayMs = undefined;
        upstream.script = defaultScript();
      }
    });

    it("an answer that breaks the schema after repair is returned repaired, reported not valid", async () => {
      upstream.script = { text: ["{'name': 'Ada', 'age': 'old',}"], finish: "stop", usage: { input: 5, output: 9 } };
      try {
        const res = await client.chat.completions.create({ model: "openai/gpt-4o", messages, ...healing } as never);
        expect(JSON.parse(res.choices[0]!.message.content!)).toEqual({ name: "Ada", age: "old" });
        expect((res as unknown as Reported).plugins).toEqual([{ id: "response-healing", healed: true, valid: false, actions: ["repaired"], errors: ["/age must be integer"] }]);
      } finally {
        upstream.script = defaultScript();
      }
    });

    it("without a JSON response_format it does nothing and says so", async () => {
      const res = await client.chat.completions.create({ model: "openai/gpt-4o", messages, plugins: [{ id: "response-healing" }] } as never);
      expect(res.choices[0]!.message.content).toBe("Hello, world");
      expect((res as unknown as Reported).plugins).toEqual([{ id: "response-healing", skipped: expect.stringContaining("response_format") }]);
    });

    it("from a preset, over gRPC: healed", async () => {
      const created = await api(h, "POST", "/presets/healed-json/chat/completions", {
        key: h.tenant.managementKey,
        body: { model: "openai/gpt-4o", messages, plugins: [{ id: "response-healing" }], response_format: { type: "json_object" } },
      });
      expect(created.status, created.text).toBe(200);
      upstream.script = { text: ["```json\n{\"ok\": true,}\n```"], finish: "stop", usage: { input: 5, output: 9 } };
      try {
        const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
        const body = struct({ model: "@preset/healed-json", messages });
        const res = await new Promise<any>((resolve, reject) =>
          chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))),
        );
        const content = res.completion.fields.choices.listValue.values[0].structValue.fields.message.structValue.fields.content.stringValue;
        expect(JSON.parse(content)).toEqual({ ok: true });
        expect(JSON.stringify(res.completion.fields.plugins)).toContain("response-healing");
        // server streaming: one content chunk, healed; the report on the finish chunk
        const contents: string[] = [];
        let reported = "";
        await new Promise<void>((resolve, reject) => {
          const call = chat.StreamChatCompletion({ body }, bearer(h.tenant.apiKey));
          call.on("data", (m: any) => {
            const fields = m.chunk?.fields;
            const choice = fields?.choices?.listValue?.values?.[0]?.structValue?.fields;
            const c = choice?.delta?.structValue?.fields?.content?.stringValue;
            if (c) contents.push(c);
            if (fields?.plugins) reported = JSON.stringify(fields.plugins);
          });
          call.on("end", resolve);
          call.on("error", reject);
        });
        expect(contents).toHaveLength(1);
        expect(JSON.parse(contents[0]!)).toEqual({ ok: true });
        expect(reported).toContain("response-healing");
      } finally {
        upstream.script = defaultScript();
      }
    });
  });

  describe("moderation", () => {
    it("clean input: checked (every message's text, the configured key), then sent to the model; reported", async () => {
      const before = upstream.requests.length;
      const res = await client.chat.completions.create({
        model: "openai/gpt-4o",
        messages: [{ role: "system", content: "Be kind." }, { role: "user", content: [{ type: "text", text: "hello there" }] }],
        plugins: [{ id: "moderation" }],
      } as never);
      expect(res.choices[0]!.message.content).toBe("Hello, world");
      expect(upstream.requests.length).toBe(before + 1);
      const checked = moderation.requests.at(-1)!;
      expect(checked.body).toEqual({ model: "omni-moderation-latest", input: ["Be kind.", "hello there"] });
      expect(checked.headers.authorization).toBe("Bearer sk-mod-secret");
      expect((res as unknown as { plugins: unknown }).plugins).toEqual([{ id: "moderation", model: "omni-moderation-latest", inputs: 2, flagged: false }]);
    });

    it("flagged input: 403 moderation_flagged with the categories in metadata, nothing sent to the model (streaming too)", async () => {
      const before = upstream.requests.length;
      for (const stream of [false, true]) {
        const err = await client.chat.completions
          .create({ model: "openai/gpt-4o", messages: [{ role: "user", content: "plan an ATTACK on my neighbour" }], stream, plugins: [{ id: "moderation" }] } as never)
          .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
        expect(err?.status).toBe(403);
        expect(err?.message).toContain("flagged");
        expect((err?.error as { metadata?: unknown }).metadata).toEqual({ reason: "moderation_flagged", retryable: false, categories: ["harassment/threatening", "violence"] });
        expect(JSON.stringify(err?.error)).not.toContain("sk-mod-secret");
      }
      expect(upstream.requests.length).toBe(before);
      // Recorded as a 403 with no attempt, the plugin's report on it.
      const rows = await waitFor("the refused requests' generations", async () => {
        const found = await h.database.db.generation.findMany({ where: { errorCode: 403, plugins: { contains: '"flagged":true' } } });
        return found.length >= 2 ? found : undefined;
      });
      expect(rows[0]!.attempts).toBe(0);
      expect(JSON.parse(rows[0]!.plugins!)).toEqual([{ id: "moderation", model: "omni-moderation-latest", inputs: 1, flagged: true, categories: ["harassment/threatening", "violence"] }]);
    });

    it("the moderation provider failing: 502, nothing sent to the model, the key not in the error", async () => {
      moderation.failStatus = 500;
      try {
        const before = upstream.requests.length;
        const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o", messages, plugins: [{ id: "moderation" }] } });
        expect(res.status).toBe(502);
        expect(res.json.error.message).toContain("moderation provider");
        expect(res.text).not.toContain("sk-mod-secret");
        expect(upstream.requests.length).toBe(before);
      } finally {
        moderation.failStatus = undefined;
      }
    });

    it("over gRPC: PERMISSION_DENIED", async () => {
      const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
      const body = struct({ model: "openai/gpt-4o", messages: [{ role: "user", content: "attack!" }], plugins: [{ id: "moderation" }] });
      const err = await new Promise<any>((resolve) => chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (e: unknown) => resolve(e)));
      expect(err?.code).toBe(7);
    });
  });

  describe("context-compression", () => {
    const long = (tag: string) => `${tag}: ${Array.from({ length: 90 }, (_, i) => `word${i}`).join(" ")}`;
    const conversation = [
      { role: "system" as const, content: "You are terse." },
      { role: "user" as const, content: long("first question") },
      { role: "assistant" as const, content: long("first answer") },
      { role: "user" as const, content: long("second question") },
      { role: "assistant" as const, content: long("second answer") },
      { role: "user" as const, content: "And now?" },
    ];
    type Reported = { plugins?: Array<Record<string, unknown>> };

    it("a prompt past the endpoint's context length loses middle messages; system and last turn kept; counts reported", async () => {
      const res = await client.chat.completions.create({ model: "acme/tiny", messages: conversation, plugins: [{ id: "context-compression" }] } as never);
      expect(res.choices[0]!.message.content).toBe("Hello, world");
      const sent = upstream.requests.at(-1)!.body.messages as Array<{ role: string; content: string }>;
      expect(sent[0]!.content).toBe("You are terse.");
      expect(sent.at(-1)!.content).toBe("And now?");
      expect(sent.length).toBeLessThan(conversation.length);
      const report = (res as unknown as Reported).plugins![0]!;
      expect(report).toMatchObject({ id: "context-compression", engine: "middle-out", tokens_before: expect.any(Number) });
      const [step] = report.compressed as Array<Record<string, number | boolean>>;
      expect(step).toMatchObject({ context_length: 300, limit: 300, fits: true, messages_truncated: 0 });
      expect(step!.messages_removed).toBe(conversation.length - sent.length);
      expect(step!.tokens_after).toBeLessThanOrEqual(300);
      expect(JSON.stringify(report)).not.toContain("word1");
      expect(await recorded(res.id)).toEqual([report]);
    });

    it("max_tokens is left room for; streaming works the same", async () => {
      const stream = await client.chat.completions.create({ model: "acme/tiny", messages: conversation, max_tokens: 150, stream: true, plugins: [{ id: "context-compression", engine: "middle-out" }] } as never);
      let reported: Reported["plugins"];
      for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & Reported>) if (chunk.plugins) reported = chunk.plugins;
      const sent = upstream.requests.at(-1)!.body.messages as Array<{ role: string; content: string }>;
      expect(sent.map((m) => m.role)).toEqual(["system", "user"]);
      expect((reported![0]!.compressed as Array<Record<string, unknown>>)[0]).toMatchObject({ limit: 150, fits: true });
    });

    it("a prompt that fits is sent unchanged", async () => {
      const res = await client.chat.completions.create({ model: "acme/tiny", messages, plugins: [{ id: "context-compression" }] } as never);
      expect(upstream.requests.at(-1)!.body.messages).toEqual(messages);
      expect((res as unknown as Reported).plugins).toEqual([{ id: "context-compression", engine: "middle-out", compressed: [] }]);
    });
  });

  describe("the Anthropic Messages dialect runs the same stage", () => {
    it("an unsupported plugin is refused, a flagged input is 403, nothing sent upstream", async () => {
      const before = upstream.requests.length;
      const body = (content: string, plugins: unknown[]) => ({ model: "openai/gpt-4o", max_tokens: 50, messages: [{ role: "user", content }], plugins });
      const refused = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: body("hi", [{ id: "switchyard-router" }]) });
      expect(refused.status).toBe(400);
      expect(refused.text).toContain('plugins[0].id \\"switchyard-router\\" is not supported');
      const flagged = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: body("attack", [{ id: "moderation" }]) });
      expect(flagged.status).toBe(403);
      expect(upstream.requests.length).toBe(before);
      const ok = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: body("hello", [{ id: "moderation" }]) });
      expect(ok.status, ok.text).toBe(200);
      expect(upstream.requests.length).toBe(before + 1);
    });
  });

  describe("the Responses dialect runs the same stage", () => {
    it("an unsupported plugin is refused, a flagged input is 403, nothing sent upstream", async () => {
      const before = upstream.requests.length;
      const body = (input: string, plugins: unknown[]) => ({ model: "openai/gpt-4o", input, plugins });
      const refused = await api(h, "POST", "/responses", { key: h.tenant.apiKey, body: body("hi", [{ id: "switchyard-router" }]) });
      expect(refused.status).toBe(400);
      expect(refused.text).toContain("is not supported by this deployment");
      const flagged = await api(h, "POST", "/responses", { key: h.tenant.apiKey, body: body("attack", [{ id: "moderation" }]) });
      expect(flagged.status).toBe(403);
      expect(upstream.requests.length).toBe(before);
      const ok = await api(h, "POST", "/responses", { key: h.tenant.apiKey, body: body("hello", [{ id: "moderation" }]) });
      expect(ok.status, ok.text).toBe(200);
      expect(upstream.requests.length).toBe(before + 1);
    });

    it("response-healing with text.format json_object: the output text is healed", async () => {
      upstream.script = { text: ["```json\n{'ok': true,}\n```"], finish: "stop", usage: { input: 5, output: 9 } };
      try {
        const res = await api(h, "POST", "/responses", {
          key: h.tenant.apiKey,
          body: { model: "openai/gpt-4o", input: "JSON please", text: { format: { type: "json_object" } }, plugins: [{ id: "response-healing" }] },
        });
        expect(res.status, res.text).toBe(200);
        const text = res.json.output.flatMap((o: any) => o.content ?? []).find((c: any) => c.type === "output_text")?.text;
        expect(JSON.parse(text)).toEqual({ ok: true });
      } finally {
        upstream.script = defaultScript();
      }
    });
  });

  describe("combined", () => {
    it("moderation, context-compression and response-healing from one preset, streaming: each reported in order of running", async () => {
      const created = await api(h, "POST", "/presets/all-three/chat/completions", {
        key: h.tenant.managementKey,
        body: {
          model: "acme/tiny",
          messages,
          response_format: { type: "json_object" },
          plugins: [{ id: "response-healing" }, { id: "context-compression" }, { id: "moderation" }],
        },
      });
      expect(created.status, created.text).toBe(200);
      const filler = (tag: string) => `${tag} ${Array.from({ length: 150 }, (_, i) => `w${i}`).join(" ")}`;
      upstream.script = { text: ["Sure: {'ok': true,", " 'n': 2"], finish: "stop", usage: { input: 250, output: 9 } };
      moderation.requests.length = 0;
      try {
        const stream = await client.chat.completions.create({
          model: "@preset/all-three",
          messages: [{ role: "user", content: filler("one") }, { role: "assistant", content: filler("two") }, { role: "user", content: "JSON please" }],
          stream: true,
        } as never);
        let text = "";
        let reported: Array<Record<string, unknown>> | undefined;
        for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & { plugins?: Array<Record<string, unknown>> }>) {
          text += chunk.choices[0]?.delta?.content ?? "";
          reported ??= chunk.plugins;
        }
        expect(JSON.parse(text)).toEqual({ ok: true, n: 2 });
        expect(reported!.map((r) => r.id)).toEqual(["moderation", "context-compression", "response-healing"]);
        expect(reported![0]).toMatchObject({ flagged: false, inputs: 3 });
        expect((reported![1]!.compressed as Array<Record<string, unknown>>)[0]).toMatchObject({ messages_removed: expect.any(Number), fits: true });
        expect(reported![2]).toMatchObject({ healed: true, valid: true });
        // moderation saw the caller's whole input; the model got the compressed one
        expect(moderation.requests[0]!.body.input).toHaveLength(3);
        expect((upstream.requests.at(-1)!.body.messages as unknown[]).length).toBeLessThan(3);
      } finally {
        upstream.script = defaultScript();
      }
    });
  });
});
