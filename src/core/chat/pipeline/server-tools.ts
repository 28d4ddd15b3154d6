/**
 * Stage "server-tools": between route and cache, so it sees the merged request (a preset's server tools
 * included). Every `tools[]` entry of a server-tool type (`<brand>:<kind>`, the web-search shorthands) must
 * name a kind Portico runs (../server-tools/kinds.ts) with parameters it honours; another is a 400 naming the
 * entry and listing what is supported. A server-tool choice (`tool_choice: {type: "<brand>:<kind>"}`) must
 * name a server tool of `tools`.
 *
 * When the request has server tools, the stage prepares the loop the execute stage runs
 * (../server-tools/loop.ts): the request sent to providers offers them as function tools beside the caller's
 * own, and `call.serverTools` holds how to run them; the generation records them (`track.serverTools`).
 */
import type { Catalog } from "../../catalog/catalog.js";
import type { ChatTool, ChatToolChoice } from "../../../contract/requests/chat-request.js";
import type { ServerToolsConfig } from "../../../config.js";
import { invalidArgument } from "../../errors.js";
import { assertSupported, serverToolKindOf, type ServerToolKind } from "../server-tools/kinds.js";
import { activate, type ActiveTool } from "../server-tools/tools.js";
import type { GuardedFetcher } from "../server-tools/guarded-fetch.js";
import type { ServerToolSession, StopCondition } from "../server-tools/session.js";
import type { ChatStage } from "./stage.js";
import type { FusionRunner } from "./plugins/fusion.js";

export interface ServerToolsDeps {
  brand: string;
  catalog: Catalog;
  config: ServerToolsConfig;
  fetcher: GuardedFetcher;
  /** The fusion runner (late-bound: its nested calls run through this very stage); absent: the fusion tool is refused. */
  fusion?: () => FusionRunner;
}

export function createServerToolsStage(deps: ServerToolsDeps): ChatStage {
  return {
    name: "server-tools",
    run(call, next) {
      const tools = Array.isArray(call.request.tools) ? call.request.tools : [];
      const active: ActiveTool[] = [];
      const seen = new Map<ServerToolKind, number>();
      const clientTools: ChatTool[] = [];
      tools.forEach((tool, i) => {
        const type = tool?.type;
        const kind = serverToolKindOf(type, deps.brand);
        if (!kind) {
          clientTools.push(tool);
          return;
        }
        assertSupported(kind, type, `tools[${i}].type`, deps.brand);
        if (seen.has(kind)) throw invalidArgument(`tools[${i}].type`, `tools lists the ${kind} server tool twice (tools[${seen.get(kind)}] and tools[${i}])`);
        seen.set(kind, i);
        for (const key of Object.keys(tool)) {
          if (key !== "type" && key !== "parameters" && key !== "cache_control") {
            throw invalidArgument(`tools[${i}].${key}`, `tools[${i}].${key} is not a property of a server tool (type, parameters, cache_control); its settings go in parameters`);
          }
        }
        const params = (tool.parameters ?? {}) as Record<string, unknown>;
        const one = activate(kind, type, params, `tools[${i}].parameters`, {
          catalog: deps.catalog,
          config: deps.config,
          fetcher: deps.fetcher,
          brand: deps.brand,
          ...(kind === "fusion" && deps.fusion ? { fusion: deps.fusion(), call } : {}),
        });
        // cache_control travels with the function tool offered in its place (Anthropic caches the tools up to it).
        if (tool.cache_control !== undefined) one.definition = { ...one.definition, cache_control: tool.cache_control } as typeof one.definition;
        active.push(one);
      });

      // The web-fetch plugin (docs/plugins.md) is the web_fetch server tool, configured by the plugin's fields.
      const fetchPlugin = webFetchPluginOf(call.request.plugins);
      if (fetchPlugin) {
        const { index, options } = fetchPlugin;
        if (seen.has("web_fetch")) {
          throw invalidArgument(`plugins[${index}].id`, `plugins[${index}] (web-fetch) and tools[${seen.get("web_fetch")}] both enable the web_fetch server tool: give one of them`);
        }
        const { id: _id, ...params } = options;
        const one = activate("web_fetch", `${deps.brand}:web_fetch`, params, `plugins[${index}]`, { catalog: deps.catalog, config: deps.config, fetcher: deps.fetcher });
        seen.set("web_fetch", -1);
        active.push(one);
      }

      const choice = call.request.tool_choice;
      let serverChoice: ActiveTool | undefined;
      if (choice && typeof choice === "object") {
        const kind = serverToolKindOf(choice.type, deps.brand);
        if (kind) {
          assertSupported(kind, choice.type, "tool_choice.type", deps.brand);
          serverChoice = active.find((t) => t.kind === kind);
          if (!serverChoice) throw invalidArgument("tool_choice.type", `tool_choice names the server tool "${String(choice.type)}", which tools does not list`);
        }
      }
      if (active.length === 0) return next();

      const names = new Map(active.map((t) => [t.name, t]));
      tools.forEach((tool, i) => {
        const name = (tool?.function as { name?: unknown } | undefined)?.name;
        if (tool?.type === "function" && typeof name === "string" && names.has(name)) {
          throw invalidArgument(`tools[${i}].function.name`, `The function name "${name}" is the name Portico offers the ${names.get(name)!.type} server tool under: rename the function`);
        }
      });

      const forced = serverChoice !== undefined || choice === "required";
      const firstChoice: ChatToolChoice | undefined = serverChoice ? { type: "function", function: { name: serverChoice.name } } : (choice ?? undefined);
      const session: ServerToolSession = {
        tools: names,
        maxTurns: deps.config.maxTurns,
        stops: (Array.isArray(call.request.stop_server_tools_when) ? call.request.stop_server_tools_when : []) as StopCondition[],
        firstChoice,
        laterChoice: forced ? "auto" : (choice ?? undefined),
        record: { turns: 0, counts: {}, calls: [] },
      };
      call.request = { ...call.request, tools: [...clientTools, ...active.map((t) => t.definition)] };
      if (firstChoice === undefined) delete call.request.tool_choice;
      else call.request.tool_choice = firstChoice;
      call.serverTools = session;
      call.track.serverTools = session.record;
      return next();
    },
  };
}

/** The request's `web-fetch` plugin entry when it is switched on. */
export function webFetchPluginOf(plugins: unknown): { index: number; options: Record<string, unknown> } | undefined {
  if (!Array.isArray(plugins)) return undefined;
  const index = plugins.findIndex((p) => (p as { id?: unknown } | null)?.id === "web-fetch");
  if (index < 0) return undefined;
  const { enabled, ...options } = plugins[index] as Record<string, unknown>;
  return enabled === false ? undefined : { index, options };
}

/**
 * For the other dialects (Anthropic Messages, Responses, Gemini), in the server-tools stage's slot (chain.ts): their
 * bodies cannot name server tools, but a preset can bring some. Those are refused (400 naming the `tools[]` entry)
 * rather than relayed: the loop runs in POST /api/v1/chat/completions only (docs/plugins.md).
 */
export function createServerToolsRefusalStage(deps: { brand: string; route: string }): ChatStage {
  return {
    name: "server-tools-refusal",
    run(call, next) {
      const tools = Array.isArray(call.request.tools) ? call.request.tools : [];
      tools.forEach((tool, i) => {
        const type = tool?.type;
        if (serverToolKindOf(type, deps.brand)) {
          throw invalidArgument(`tools[${i}].type`, `The server tool "${String(type)}" (from the preset) runs in POST /api/v1/chat/completions only, not in ${deps.route}`);
        }
      });
      return next();
    },
  };
}
