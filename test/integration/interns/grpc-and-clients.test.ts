/**
 * The same intern chat for internal gRPC callers (@grpc/grpc-js built from the .proto files) and
 * for the published `openai` client reading a whole stream through the gateway.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, grpc, grpcClient } from "../../helpers/grpc.js";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { MODEL, startFakeHost, type FakeHost } from "./fake-host.js";
import { createTestIntern } from "./sse-client.js";
import { waitFor } from "../../helpers/wait.js";

// No fault is tested here: start and liveness limits loose enough for a loaded 2-core machine's stalls.
const ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "5000",
  PORTICO_INTERN_START_TIMEOUT_MS: "15000",
  PORTICO_LINK_PING_INTERVAL_MS: "500",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "10000",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

interface StreamResult {
  events: any[];
  error?: grpc.ServiceError;
}

function streamChat(client: any, request: unknown, key: string, opts: { cancelAfter?: (ev: any) => boolean } = {}): Promise<StreamResult> {
  return new Promise((resolve) => {
    const events: any[] = [];
    const call = client.StreamChat(request, bearer(key));
    call.on("data", (ev: any) => {
      events.push(ev);
      if (opts.cancelAfter?.(ev)) call.cancel();
    });
    call.on("error", (error: grpc.ServiceError) => resolve({ events, error }));
    call.on("end", () => resolve({ events }));
  });
}

const userMsg = (text: string) => ({ role: "user", content: { stringValue: text } });

describe.each(["sqlite", "postgresql"] as const)("intern chat for gRPC and OpenAI clients (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let host: FakeHost;
  let client: any;
  let key: string;

  beforeAll(async () => {
    h = await startHarness({ provider, env: ENV });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    client = grpcClient("portico/interns/v1/interns_service.proto", "portico.interns.v1.InternsService", h.coreUrl);
    key = h.tenant.apiKey;
  });
  afterAll(async () => {
    client?.close();
    host?.kill();
    await h?.close();
  });

  it("gRPC: events in wire order with the reported model beside them", async () => {
    const r = await streamChat(client, { intern_id: internId, stream: true, messages: [userMsg("hello")] }, key);
    expect(r.error).toBeUndefined();
    expect(r.events.map((e) => e.event)).toEqual(["role", "reasoning", "content", "content", "finish", "final"]);
    expect(r.events[0].role.role).toBe("assistant");
    // One model per response; the intern's next response names the model it reported.
    expect(new Set(r.events.map((e) => e.model)).size).toBe(1);
    // The reported model is stored off the request path (run-events.ts, `later`): the next run reads it once written.
    await waitFor("the intern's reported model stored", async () => (await h.database.db.intern.findUnique({ where: { id: internId } }))?.model === MODEL);
    const next = await streamChat(client, { intern_id: internId, stream: true, messages: [userMsg("hello")] }, key);
    expect(new Set(next.events.map((e) => e.model))).toEqual(new Set([MODEL]));
    expect(r.events[4].finish.reason).toBe("stop");
    expect(r.events[5].final.usage).toMatchObject({ prompt_tokens: "3", completion_tokens: "2", total_tokens: "5", cost: 0.001 });
  });

  it("gRPC: pause and answer", async () => {
    const first = await streamChat(client, { intern_id: internId, stream: true, approval_mode: "manual", messages: [userMsg("ask")] }, key);
    const q = first.events.find((e) => e.event === "question").question;
    expect(q).toMatchObject({ kind: "permission", operation: "shell", options: ["allow_once", "reject_once"] });
    expect(first.events.at(-2).finish.reason).toBe("tool_calls");
    const final = first.events.at(-1).final;
    expect(final.usage).toBeNull();
    const second = await streamChat(
      client,
      {
        intern_id: internId,
        stream: true,
        session_id: final.session_id,
        messages: [{ role: "tool", tool_call_id: q.interaction_id, content: { stringValue: "allow_once" } }],
      },
      key,
    );
    expect(second.events.map((e) => e.event)).toEqual(["role", "content", "finish", "final"]);
    expect(second.events[1].content.text).toBe("after");
  });

  it("gRPC: errors before streaming are statuses with the same reasons", async () => {
    const bad = await streamChat(client, { intern_id: internId, stream: false, messages: [userMsg("hello")] }, key);
    expect(bad.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(bad.events).toHaveLength(0);
    const unknown = await streamChat(client, { intern_id: "nope", stream: true, messages: [userMsg("hello")] }, key);
    expect(unknown.error?.code).toBe(grpc.status.NOT_FOUND);
    const unauth = await streamChat(client, { intern_id: internId, stream: true, messages: [userMsg("hello")] }, "pk-v1-" + "0".repeat(64));
    expect(unauth.error?.code).toBe(grpc.status.UNAUTHENTICATED);
    const outsider = await h.createTenant({ internsProgramme: false });
    const hidden = await streamChat(client, { intern_id: internId, stream: true, messages: [userMsg("hello")] }, outsider.apiKey);
    expect(hidden.error?.code).toBe(grpc.status.NOT_FOUND);
  });

  it("gRPC: cancelling the call cancels the run on the host", async () => {
    const before = host.cancels.length;
    await streamChat(client, { intern_id: internId, stream: true, messages: [userMsg("slow")] }, key, {
      cancelAfter: (ev) => ev.event === "content",
    });
    // The "slow" run never ends by itself and its limits are far off: only the caller's cancel can end it.
    await host.waitFor(() => host.cancels.length > before, 30_000);
  });

  it("the openai client reads a whole stream", async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${h.baseUrl}/api/v1/interns/${internId}`, maxRetries: 0 });
    const stream = await openai.chat.completions.create({ model: "ignored", stream: true, messages: [{ role: "user", content: "hello" }] });
    const chunks: any[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello world");
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason).toBe("stop");
    const final = chunks.at(-1) as any;
    expect(final.choices).toEqual([]);
    expect(final.usage.total_tokens).toBe(5);
    expect(typeof final.session_id).toBe("string");
  });

  it("the openai client sees the pause as a tool call and answers it", async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${h.baseUrl}/api/v1/interns/${internId}`, maxRetries: 0 });
    const first = await openai.chat.completions.create({
      model: "ignored",
      stream: true,
      messages: [{ role: "user", content: "ask" }],
      approval_mode: "manual",
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks: any[] = [];
    for await (const c of first) chunks.push(c);
    const call = chunks.find((c) => c.choices[0]?.delta?.tool_calls)!.choices[0].delta.tool_calls[0];
    expect(call.function.name).toBe("service.provide_input");
    const sessionId = (chunks.at(-1) as any).session_id;
    const second = await openai.chat.completions.create({
      model: "ignored",
      stream: true,
      messages: [
        { role: "user", content: "ask" },
        { role: "assistant", content: null, tool_calls: [{ id: call.id, type: "function", function: call.function }] },
        { role: "tool", tool_call_id: call.id, content: "allow_once" },
      ],
      session_id: sessionId,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const text: string[] = [];
    for await (const c of second) text.push(c.choices[0]?.delta?.content ?? "");
    expect(text.join("")).toBe("after");
  });
});
