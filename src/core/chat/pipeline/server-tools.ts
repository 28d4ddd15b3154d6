/**
 * Stage "server-tools": between preset and plan, so it sees the merged request. Every `tools[]` entry of a
 * server-tool type (`<brand>:<kind>`, the web-search shorthands) must name a kind Portico runs
 * (../server-tools/kinds.ts); another is a 400 naming the entry and listing what is supported. A server-tool
 * choice (`tool_choice: {type: "<brand>:<kind>"}`) must name a server tool of `tools`.
 */
import { invalidArgument } from "../../errors.js";
import { assertSupported, serverToolKindOf } from "../server-tools/kinds.js";
import type { ChatStage } from "./stage.js";

export function createServerToolsStage(deps: { brand: string }): ChatStage {
  return {
    name: "server-tools",
    run(call, next) {
      const tools = call.request.tools;
      if (Array.isArray(tools)) {
        tools.forEach((tool, i) => {
          const type = (tool as { type?: unknown } | null)?.type;
          const kind = serverToolKindOf(type, deps.brand);
          if (kind) assertSupported(kind, type as string, `tools[${i}].type`, deps.brand);
        });
      }
      const choice = call.request.tool_choice as { type?: unknown } | undefined | null;
      if (choice && typeof choice === "object") {
        const kind = serverToolKindOf(choice.type, deps.brand);
        if (kind) {
          assertSupported(kind, choice.type as string, "tool_choice.type", deps.brand);
          const offered = Array.isArray(tools) && tools.some((t) => serverToolKindOf((t as { type?: unknown })?.type, deps.brand) === kind);
          if (!offered) throw invalidArgument("tool_choice.type", `tool_choice names the server tool "${String(choice.type)}", which tools does not list`);
        }
      }
      return next();
    },
  };
}
