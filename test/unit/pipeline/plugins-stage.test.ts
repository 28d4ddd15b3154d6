/** The plugins stage without a server (src/core/chat/pipeline/plugins): refusals and the moderation plugin's missing provider. */
import { describe, expect, it } from "vitest";
import { compose, newCall, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createPluginsStage } from "../../../src/core/chat/pipeline/plugins/index.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { ConnectError } from "@connectrpc/connect";
import { createResponseHealingPlugin } from "../../../src/core/chat/pipeline/plugins/response-healing.js";

const caller: Caller = {
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1",
  isManagement: false, internsProgramme: false,
};
let calls = 0;
const answer: ChatStage = {
  name: "answer",
  async run() {
    calls++;
    return { kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] } };
  },
};
const run = (plugins: unknown[]) => {
  const call = newCall(caller, new AbortController().signal, false, { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], plugins } as unknown as CanonicalRequest);
  return compose([createPluginsStage({ config: { moderation: undefined } }), answer])(call);
};
const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ConnectError);
  return { message: (err as ConnectError).rawMessage, field: errorDetailOf(err as ConnectError)?.field };
};

describe("plugins stage", () => {
  it("moderation without a configured provider: 400 naming plugins[i].id, the model not called", async () => {
    calls = 0;
    const r = await refusal(run([{ id: "response-healing" }, { id: "moderation" }]));
    expect(r.field).toBe("plugins[1].id");
    expect(r.message).toContain("no moderation provider is configured");
    expect(calls).toBe(0);
  });

  it("an id listed twice is refused", async () => {
    const r = await refusal(run([{ id: "response-healing" }, { id: "response-healing", enabled: false }]));
    expect(r.field).toBe("plugins[1].id");
    expect(r.message).toContain("listed twice");
  });

  it("unsupported ids list what is supported", async () => {
    const r = await refusal(run([{ id: "auto-router" }]));
    expect(r.message).toMatch(/not supported by this deployment \(the supported plugins are .*moderation.*response-healing/);
  });
});

describe("response-healing on a stream", () => {
  const ev = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) =>
    ({ id: "g", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: finish }], ...extra }) as never;
  async function* source(events: unknown[]) {
    for (const e of events) yield e as never;
  }
  const collect = async (events: unknown[]) => {
    const plugin = createResponseHealingPlugin();
    const call = newCall(caller, new AbortController().signal, true, { model: "m", messages: [], response_format: { type: "json_object" } } as unknown as CanonicalRequest);
    const run = { options: { id: "response-healing" }, field: "plugins[0]", report: { id: "response-healing" } };
    await plugin.before!(call, run);
    const outcome = plugin.after!(call, run, { kind: "stream", events: source(events) });
    const out: any[] = [];
    if (outcome.kind === "stream") for await (const e of outcome.events) out.push(e);
    return { out, report: run.report };
  };

  it("the role chunk passes at once, text is held and healed before the finish chunk, usage last", async () => {
    const { out, report } = await collect([ev({ role: "assistant", content: "" }), ev({ content: "```json\n{'a': 1," }), ev({ content: "}\n```" }), ev({}, "stop"), { id: "g", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }]);
    expect(out.map((e) => e.choices[0]?.delta?.content ?? (e.usage ? "usage" : e.choices[0]?.finish_reason))).toEqual(["", '{"a": 1}', "stop", "usage"]);
    expect(report).toMatchObject({ healed: true, valid: true, held_ms: expect.any(Number) });
  });

  it("a stream that fails: the held text unhealed, then the error chunk", async () => {
    const { out, report } = await collect([ev({ role: "assistant" }), ev({ content: "{'a': " }), ev({}, "error", { error: { reason: 23, code: 502, message: "broke" } })]);
    expect(out.map((e) => e.choices[0]?.delta?.content ?? e.choices[0]?.finish_reason)).toEqual([null, "{'a': ", "error"]);
    expect(report).toMatchObject({ healed: false, valid: false });
  });
});
