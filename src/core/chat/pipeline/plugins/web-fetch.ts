/**
 * Plugin "web-fetch" (docs/plugins.md): the web_fetch server tool, switched on by a plugin entry. Its fields
 * (`allowed_domains`, `blocked_domains`, `max_content_tokens`, `max_uses`) are the tool's parameters; the
 * server-tools stage (../server-tools.ts, before plan) offers the tool and checks them (a 400 naming
 * `plugins[<i>].<field>`), and the execute stage's loop runs it behind the same SSRF-guarded client as the
 * tool. This plugin only checks that the tool was set up (the Messages and Responses routes do not run the
 * loop: there the plugin is refused) and reports it; the calls are on the generation's `server_tools`.
 *
 * The report: `tool` (the server tool type), `max_uses` and `max_content_tokens` when given. Never content.
 */
import { invalidArgument } from "../../../errors.js";
import type { Plugin } from "./types.js";

export function createWebFetchPlugin(): Plugin {
  return {
    id: "web-fetch",
    order: 13,
    before(call, run) {
      const tool = [...(call.serverTools?.tools.values() ?? [])].find((t) => t.kind === "web_fetch");
      if (!tool) {
        throw invalidArgument(`${run.field}.id`, `${run.field}.id "web-fetch" runs the web_fetch server tool, which runs in POST /api/v1/chat/completions only`);
      }
      run.report.tool = tool.type;
      for (const key of ["max_uses", "max_content_tokens"] as const) if (typeof run.options[key] === "number") run.report[key] = run.options[key];
    },
  };
}
