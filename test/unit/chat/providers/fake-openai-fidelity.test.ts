/** The fake OpenAI upstream is read correctly by the real `openai` SDK (stream, tools, usage, errors). */
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { startFakeOpenAI } from "../../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../../helpers/fake-upstreams/server.js";

let fake: FakeUpstream | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});
const client = (f: FakeUpstream) => new OpenAI({ apiKey: "sk-fidelity", baseURL: `${f.url}/v1`, maxRetries: 0 });

describe("fake OpenAI upstream with the openai SDK", () => {
  it("non-streaming completion with tool calls and usage", async () => {
    fake = await startFakeOpenAI({ text: [], toolCalls: [{ id: "call_1", name: "f", arguments: '{"a":1}' }], finish: "tool_calls", usage: { input: 3, output: 4 } });
    const res = await client(fake).chat.completions.create({ model: "gpt-x", messages: [{ role: "user", content: "hi" }] });
    expect(res.choices[0]!.message.tool_calls?.[0]).toMatchObject({ id: "call_1", function: { name: "f", arguments: '{"a":1}' } });
    expect(res.choices[0]!.finish_reason).toBe("tool_calls");
    expect(res.usage?.total_tokens).toBe(7);
    expect(fake.requests[0]!.headers.authorization).toBe("Bearer sk-fidelity");
  });

  it("stream with include_usage", async () => {
    fake = await startFakeOpenAI({ text: ["x", "y"], finish: "stop", usage: { input: 1, output: 2 } });
    const stream = await client(fake).chat.completions.create({ model: "gpt-x", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } });
    let text = "";
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe("xy");
    expect(usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 2 });
  });

  it("error bodies surface as APIError with status, type and code", async () => {
    fake = await startFakeOpenAI(undefined, { failStatus: 429, failMessage: "Rate limit reached" });
    const err = (await client(fake).chat.completions.create({ model: "gpt-x", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.status).toBe(429);
    expect(err.code).toBe("rate_limit_exceeded");
    expect(err.message).toContain("Rate limit reached");
  });
});
