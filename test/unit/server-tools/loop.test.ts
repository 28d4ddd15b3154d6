/**
 * The server-tool loop in the execute stage without a server: a scripted provider adapter plays the turns.
 * A provider failing on a later turn of a stream ends it with the error chunk; `max_cost` makes the final turn.
 */
import { describe, expect, it } from "vitest";
import pino from "pino";
import { compose, type Attempt, type ChatCall, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { newCall } from "../../../src/core/chat/pipeline/stage.js";
import { createExecuteStage } from "../../../src/core/chat/pipeline/execute.js";
import { createRecordStage } from "../../../src/core/chat/pipeline/record.js";
import { createServerToolsStage } from "../../../src/core/chat/pipeline/server-tools.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { createGuardedFetcher } from "../../../src/core/chat/server-tools/guarded-fetch.js";
import { loadConfig } from "../../../src/config.js";
import { UpstreamError, type ChatChunk, type ChatCompletion, type ProviderAdapter } from "../../../src/core/chat/providers/index.js";
import type { GenerationRecord } from "../../../src/core/chat/seams.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";
import type { Endpoint } from "../../../src/core/catalog/types.js";

const caller = { keyId: "k", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false } as Caller;
const logger = pino({ level: "silent" });
const config = loadConfig({}).serverTools;
const serverTools = createServerToolsStage({ brand: "service", catalog: createCatalog(BUILTIN_CATALOG), config, fetcher: createGuardedFetcher(config.webFetch) });
const usage = { prompt_tokens: 1000, completion_tokens: 0, total_tokens: 1000 };

type Turn = "datetime" | "answer" | "fail";
function scripted(turns: Turn[], bodies: CanonicalRequest[]): ProviderAdapter {
  let n = 0;
  const next = () => turns[Math.min(n++, turns.length - 1)]!;
  return {
    format: "openai",
    upstreamBody: (call) => ({ model: call.model }),
    async complete(call): Promise<ChatCompletion> {
      bodies.push(call.body);
      const t = next();
      if (t === "fail") throw new UpstreamError(500, "upstream error: down", false);
      const message = t === "datetime"
        ? { role: "assistant" as const, content: null, tool_calls: [{ id: `c${n}`, type: "function" as const, function: { name: "datetime", arguments: "{}" } }] }
        : { role: "assistant" as const, content: "answer" };
      return { id: "up", object: "chat.completion", created: 1, model: call.model, choices: [{ index: 0, message, finish_reason: t === "datetime" ? "tool_calls" : "stop" }], usage };
    },
    async *stream(call): AsyncGenerator<ChatChunk> {
      bodies.push(call.body);
      const t = next();
      if (t === "fail") throw new UpstreamError(500, "upstream error: down", false);
      const base = { id: "up", object: "chat.completion.chunk" as const, created: 1, model: call.model };
      if (t === "datetime") {
        yield { ...base, choices: [{ index: 0, delta: { reasoning: "think", reasoning_details: [{ type: "reasoning.text", text: "thi", index: 0 }] }, finish_reason: null }] };
        yield { ...base, choices: [{ index: 0, delta: { reasoning: "", reasoning_details: [{ type: "reasoning.text", text: "nk", signature: "sig-1", index: 0 }] }, finish_reason: null }] };
        yield { ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "datetime", arguments: "{}" } }] } as never, finish_reason: null }] };
        yield { ...base, choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] };
      } else {
        yield { ...base, choices: [{ index: 0, delta: { content: "answer" }, finish_reason: null }] };
        yield { ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] };
      }
      yield { ...base, choices: [], usage };
    },
  };
}

function run(turns: Turn[], streamed: boolean, body: Record<string, unknown> = {}) {
  const bodies: CanonicalRequest[] = [];
  const records: GenerationRecord[] = [];
  const adapter = scripted(turns, bodies);
  const given: ChatStage = {
    name: "given",
    run(call: ChatCall, next) {
      const a: Attempt = {
        provider: "openai", requestedModel: "openai/gpt-4o", credentialId: "c", credentialSource: "byok", adapter,
        call: { model: "gpt-4o", body: call.request, baseUrl: "http://127.0.0.1:1", apiKey: "k", signal: call.signal },
        endpoint: { pricing: { prompt: "0.001", completion: "0.001" } } as unknown as Endpoint,
      };
      call.attempts = [a];
      return next();
    },
  };
  const pipeline = compose([createRecordStage({ generations: { record: (r) => records.push(r) } }), serverTools, given, createExecuteStage({ logger })]);
  const request = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], tools: [{ type: "service:datetime" }], ...body } as unknown as CanonicalRequest;
  return { outcome: pipeline(newCall(caller, new AbortController().signal, streamed, request)), bodies, records };
}

describe("server-tool loop", () => {
  it("a stream whose second turn fails ends with the error chunk, after the progress chunks", async () => {
    const { outcome, records, bodies } = run(["datetime", "fail"], true);
    const o = await outcome;
    if (o.kind !== "stream") throw new Error("expected a stream");
    const events: StreamEvent[] = [];
    for await (const e of o.events) events.push(e);
    const activity = events.filter((e) => (e as { server_tool_activity?: unknown }).server_tool_activity);
    expect(activity).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ choices: [{ finish_reason: "error" }], error: { code: 502, message: expect.stringMatching(/Every provider attempt failed.*down/) } });
    expect(records[0]).toMatchObject({ status: "error", errorCode: 502 });
    expect(JSON.parse(records[0]!.serverTools!)).toMatchObject({ turns: 2, counts: { "service:datetime": 1 } });
    // The turn's signed reasoning went back with its calls; the caller saw the reasoning stream.
    expect(bodies[1]!.messages[1]).toMatchObject({ role: "assistant", reasoning_details: [{ type: "reasoning.text", text: "think", signature: "sig-1", index: 0 }], tool_calls: [{ id: "c1" }] });
    expect(events.some((e) => e.choices[0]?.delta?.reasoning === "think")).toBe(true);
  });

  it("max_cost: once the turns cost as much, one final turn without tools", async () => {
    // Each turn: 1000 prompt tokens at $0.001 = $1.
    const { outcome, bodies, records } = run(["datetime", "datetime", "answer"], false, { stop_server_tools_when: [{ type: "max_cost", max_cost_in_dollars: 0.5 }] });
    const o = await outcome;
    expect(o.kind === "completion" && o.completion.choices[0]!.message.content).toBe("");
    expect(bodies.map((b) => b.tool_choice)).toEqual([undefined, "none"]);
    expect(JSON.parse(records[0]!.serverTools!)).toMatchObject({ turns: 2, stoppedBy: "max_cost" });
    expect(records[0]).toMatchObject({ promptTokens: 2000, attempts: 2, status: "success" });
  });

  it.each([
    [{ type: "max_tokens_used", max_tokens: 1000 }, "max_tokens_used"],
    [{ type: "has_tool_call", tool_name: "datetime" }, "has_tool_call"],
    [{ type: "has_tool_call", tool_name: "service:datetime" }, "has_tool_call"],
    [{ type: "finish_reason_is", reason: "tool_calls" }, "finish_reason_is"],
    [{ type: "step_count_is", step_count: 1 }, "step_count_is"],
  ])("stop_server_tools_when %j fires after the first turn", async (condition, by) => {
    const { outcome, bodies, records } = run(["datetime", "datetime", "answer"], false, { stop_server_tools_when: [{ type: "step_count_is", step_count: 5 }, condition] });
    await outcome;
    expect(bodies.map((b) => b.tool_choice)).toEqual([undefined, "none"]);
    expect(JSON.parse(records[0]!.serverTools!)).toMatchObject({ turns: 2, stoppedBy: by });
  });

  it("a condition that does not fire leaves the loop to the model", async () => {
    const { outcome, bodies } = run(["datetime", "answer"], false, { stop_server_tools_when: [{ type: "has_tool_call", tool_name: "web_fetch" }] });
    const o = await outcome;
    expect(o.kind === "completion" && o.completion.choices[0]!.message.content).toBe("answer");
    expect(bodies.map((b) => b.tool_choice)).toEqual([undefined, undefined]);
  });

  it("no server tools: the plain path, nothing recorded", async () => {
    const { outcome, records } = run(["answer"], false, { tools: [{ type: "function", function: { name: "f" } }] });
    const o = await outcome;
    expect(o.kind === "completion" && o.completion.choices[0]!.message.content).toBe("answer");
    expect(records[0]!.serverTools).toBeNull();
  });
});
