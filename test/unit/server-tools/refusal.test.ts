/** The server-tools stage refuses the server tool kinds Portico does not run, naming the entry and listing what is supported. */
import { describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { createServerToolsStage } from "../../../src/core/chat/pipeline/server-tools.js";
import { newCall } from "../../../src/core/chat/pipeline/stage.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";

const caller = { keyId: "k", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false } as Caller;
const stage = createServerToolsStage({ brand: "service" });
const run = async (body: Record<string, unknown>) => {
  const call = newCall(caller, new AbortController().signal, false, { model: "openai/x", messages: [{ role: "user", content: "hi" }], ...body } as CanonicalRequest);
  try {
    await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [] } }));
    return null;
  } catch (err) {
    return err as ConnectError;
  }
};

describe("server-tools stage: refusals", () => {
  it.each(["bash", "files", "subagent", "advisor", "image_generation"])("service:%s is not supported, with the decision and the supported list", async (kind) => {
    const err = await run({ tools: [{ type: "function", function: { name: "f" } }, { type: `service:${kind}` }] });
    expect(err).toBeInstanceOf(ConnectError);
    expect(err!.rawMessage).toContain(`"service:${kind}" is not supported`);
    expect(err!.rawMessage).toContain("supported server tools:");
  });

  it("function tools alone pass", async () => {
    expect(await run({ tools: [{ type: "function", function: { name: "f" } }] })).toBeNull();
  });

  it("a server-tool choice must name a listed server tool", async () => {
    const err = await run({ tools: [{ type: "function", function: { name: "f" } }], tool_choice: { type: "service:bash" } });
    expect(err!.rawMessage).toContain("not supported");
  });
});
