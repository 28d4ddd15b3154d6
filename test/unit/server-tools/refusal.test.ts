/** The server-tools stage refuses the server tool kinds Portico does not run, naming the entry and listing what is supported. */
import { describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { createServerToolsStage } from "../../../src/core/chat/pipeline/server-tools.js";
import { newCall } from "../../../src/core/chat/pipeline/stage.js";
import { loadConfig } from "../../../src/config.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { createGuardedFetcher } from "../../../src/core/chat/server-tools/guarded-fetch.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";

const caller = { keyId: "k", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false } as Caller;
const config = loadConfig({}).serverTools;
const stage = createServerToolsStage({ brand: "service", catalog: createCatalog(BUILTIN_CATALOG), config, fetcher: createGuardedFetcher(config.webFetch) });
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

  it("fusion without the chat handler's runner (this stage alone): 400 saying where it runs; the supported list has it", async () => {
    const err = await run({ tools: [{ type: "service:fusion", parameters: { analysis_models: ["openai/gpt-4o"] } }] });
    expect(err!.rawMessage).toContain("the fusion server tool runs in POST /api/v1/chat/completions");
    const other = await run({ tools: [{ type: "service:bash" }] });
    expect(other!.rawMessage).toContain("service:datetime, service:experimental__search_models, service:fusion, service:web_fetch, service:web_search");
  });

  it("web_search without a configured engine: 400 saying what is missing", async () => {
    const err = await run({ tools: [{ type: "web_search_preview" }] });
    expect(err!.rawMessage).toContain("no search engine is configured");
  });

  it("a parameter Portico does not honour is refused, named", async () => {
    const err = await run({ tools: [{ type: "service:web_fetch", parameters: { engine: "exa" } }] });
    expect(err!.rawMessage).toContain("tools[0].parameters.engine");
    const err2 = await run({ tools: [{ type: "service:datetime", parameters: { timezone: "Mars/Olympus" } }] });
    expect(err2!.rawMessage).toContain("tools[0].parameters.timezone");
  });

  it("a property beside type/parameters/cache_control is refused (OpenAI's top-level web_search options)", async () => {
    const err = await run({ tools: [{ type: "web_search_preview", search_context_size: "low" }] });
    expect(err!.rawMessage).toContain("tools[0].search_context_size is not a property of a server tool");
  });

  it("a function named like a server tool is refused", async () => {
    const err = await run({ tools: [{ type: "service:datetime" }, { type: "function", function: { name: "datetime" } }] });
    expect(err!.rawMessage).toContain("rename the function");
  });

  it("server tools are offered as function tools; a server-tool choice becomes a function choice", async () => {
    const call = newCall(caller, new AbortController().signal, false, {
      model: "openai/x", messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "f" } }, { type: "service:datetime" }], tool_choice: { type: "service:datetime" },
    } as CanonicalRequest);
    await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [] } }));
    expect((call.request.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual(["f", "datetime"]);
    expect(call.request.tool_choice).toEqual({ type: "function", function: { name: "datetime" } });
    expect(call.serverTools?.laterChoice).toBe("auto");
  });

  it("a server-tool choice must name a listed server tool", async () => {
    const err = await run({ tools: [{ type: "function", function: { name: "f" } }], tool_choice: { type: "service:bash" } });
    expect(err!.rawMessage).toContain("not supported");
  });
});
