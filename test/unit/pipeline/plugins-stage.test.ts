/** The plugins stage without a server (src/core/chat/pipeline/plugins): refusals and the moderation plugin's missing provider. */
import { describe, expect, it } from "vitest";
import { compose, newCall, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createPluginsStage } from "../../../src/core/chat/pipeline/plugins/index.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { ConnectError } from "@connectrpc/connect";

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
