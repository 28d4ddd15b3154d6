/**
 * Stage "plugins": runs the request's `plugins[]` (from the request or its preset; docs/plugins.md). It sits
 * between plan and spend: it sees the merged request and the planned attempts (context-compression needs each
 * attempt's context length), may change them before the spend stage reserves the request's cost, and wraps the
 * outcome on the way back (response-healing).
 *
 * A plugin id the deployment does not implement is refused with 400 naming `plugins[<i>].id`, before anything
 * is sent upstream: a request field is honoured or refused, never dropped. An entry with `enabled: false` is
 * switched off and not run (so it is never refused). An id listed twice is refused (which entry would win is
 * not obvious). What each plugin did is recorded on the generation (`track.plugins`, the Generation's `plugins`
 * column) and shown on the answer (`plugins`, docs/plugins.md).
 */
import { invalidArgument } from "../../../errors.js";
import type { ChatCall, ChatOutcome, ChatStage, Next } from "../stage.js";
import { tapEvents } from "../tap.js";
import { createResponseHealingPlugin } from "./response-healing.js";
import { createModerationPlugin } from "./moderation.js";
import { createContextCompressionPlugin } from "./context-compression.js";
import type { PluginsConfig, ServerToolsConfig } from "../../../../config.js";
import type { Plugin, PluginRun } from "./types.js";
import { routerPlugins, type RouterDeps } from "./routers.js";
import { createFileParserPlugin, refuseUnreadableFiles } from "./file-parser.js";
import { createWebPlugin } from "./web.js";
import { createWebFetchPlugin } from "./web-fetch.js";
import { createFusionPlugin, type FusionDeps } from "./fusion.js";

export type { Plugin, PluginReport, PluginRun } from "./types.js";

export interface PluginsDeps {
  /** The plugins' settings (src/config.ts): the moderation provider. */
  config?: PluginsConfig;
  /** The plugins this deployment implements; default: the built-in ones ({@link builtinPlugins}). */
  plugins?: readonly Plugin[];
  /** What the router plugins read (the catalog, the caller's providers); absent: no router plugin is offered. */
  routing?: RouterDeps;
  /** The search engines (the server tools' settings) the web plugin searches with; absent: the web plugin is refused as not configured. */
  search?: ServerToolsConfig["search"];
  /** What the fusion plugin runs its panel through; absent: fusion is not offered (refused as unsupported). */
  fusion?: FusionDeps;
}

/** The plugins Portico implements (docs/plugins.md). */
export function builtinPlugins(config: PluginsConfig | undefined, routing?: RouterDeps, search?: ServerToolsConfig["search"], fusion?: FusionDeps): Plugin[] {
  return [
    ...(fusion ? [createFusionPlugin(fusion)] : []),
    createModerationPlugin(config?.moderation),
    createWebPlugin(search, routing?.catalog),
    createWebFetchPlugin(),
    createFileParserPlugin(routing ? { catalog: routing.catalog } : {}),
    createContextCompressionPlugin(),
    createResponseHealingPlugin(),
    ...(routing ? routerPlugins(routing) : []),
  ];
}

/**
 * Stage "route" (before plan): runs the `route` hook of the request's router plugins (auto-router,
 * auto-beta-router, pareto-router; routers.ts), which replace `model` with the one they choose, so plan,
 * execute, the answer and the generation all see the chosen model. At most one router per request (400 naming
 * the second). The model `<brand>/auto` with no router entry runs auto-router with its defaults. Entries it
 * does not know are left to the plugins stage (which refuses them after plan, before anything is sent).
 */
export function createPluginRoutingStage(deps: PluginsDeps = {}): ChatStage {
  const all = deps.plugins ?? builtinPlugins(deps.config, deps.routing, deps.search, deps.fusion);
  const byId = new Map(all.filter((p) => p.route).map((p) => [p.id, p]));
  const preparing = new Map(all.filter((p) => p.prepare && !p.route).map((p) => [p.id, p]));
  const auto = deps.routing ? `${deps.routing.brand}/auto` : undefined;
  return {
    name: "route",
    run(call, next) {
      // No plugin entry and not the `<brand>/auto` model: nothing to route (no async step of its own).
      const none = !Array.isArray(call.request.plugins) || call.request.plugins.length === 0;
      if (none && (!auto || typeof call.request.model !== "string" || call.request.model.toLowerCase() !== auto)) return next();
      return routed(call, next);
    },
  };

  async function routed(call: ChatCall, next: Next): Promise<ChatOutcome> {
    const entries = Array.isArray(call.request.plugins) ? call.request.plugins : [];
    let routed: { plugin: Plugin; run: PluginRun } | undefined;
    entries.forEach((raw, i) => {
      const options = raw as Record<string, unknown>;
      const plugin = byId.get(String(options.id));
      if (!plugin || options.enabled === false) return;
      const field = `plugins[${i}]`;
      if (routed) throw invalidArgument(`${field}.id`, `${field}.id "${plugin.id}": ${routed.run.field} ("${routed.plugin.id}") already chooses the model; give one router plugin per request`);
      routed = { plugin, run: { options, field, report: { id: plugin.id } } };
    });
    const model = typeof call.request.model === "string" ? call.request.model.toLowerCase() : "";
    if (!routed && auto && model === auto) {
      const plugin = byId.get("auto-router");
      if (plugin) routed = { plugin, run: { options: { id: "auto-router" }, field: "model", report: { id: "auto-router", trigger: auto } } };
    }
    // Plugins that set up the request before plan without choosing among models (fusion's judge); a judge
    // named beside a router is refused before either runs.
    const prepares: PluginRun[] = [];
    const preparers: Plugin[] = [];
    for (const [i, raw] of entries.entries()) {
      const options = raw as Record<string, unknown>;
      const plugin = preparing.get(String(options.id));
      if (!plugin || options.enabled === false) continue;
      const field = `plugins[${i}]`;
      const names = options.model !== undefined ? "model" : options.preset !== undefined ? "preset" : undefined;
      if (routed && names) {
        throw invalidArgument(`${field}.${names}`, `${field}.${names} names the ${plugin.id} judge, but ${routed.run.field} ("${routed.plugin.id}") already chooses the model: give one or the other`);
      }
      prepares.push({ options, field, report: { id: plugin.id } });
      preparers.push(plugin);
    }
    if (routed) {
      call.track.plugins.push(routed.run.report);
      await routed.plugin.route!(call, routed.run);
    }
    for (const [i, plugin] of preparers.entries()) await plugin.prepare!(call, prepares[i]!);
    return next();
  }
}

export function createPluginsStage(deps: PluginsDeps = {}): ChatStage {
  const byId = new Map((deps.plugins ?? builtinPlugins(deps.config, deps.routing, deps.search, deps.fusion)).map((p) => [p.id, p]));
  const supported = [...byId.keys()].sort();
  return {
    name: "plugins",
    run(call, next) {
      const entries = Array.isArray(call.request.plugins) ? call.request.plugins : [];
      // The routing stage's report (a `<brand>/auto` model) is shown on the answer even without entries.
      if (entries.length === 0 && call.track.plugins.length === 0) {
        refuseUnreadableFiles(call, deps.routing?.catalog);
        return next();
      }
      return withPlugins(call, next, entries);
    },
  };

  async function withPlugins(call: ChatCall, next: Next, entries: unknown[]): Promise<ChatOutcome> {
    const runs: Array<{ plugin: Plugin; run: PluginRun }> = [];
    const seen = new Set<string>();
    const from = call.track.presetSlug ? ` (after preset "${call.track.presetSlug}" was applied: its configuration may set it)` : "";
    entries.forEach((raw, i) => {
      const options = raw as Record<string, unknown>;
      const id = String(options.id);
      const field = `plugins[${i}]`;
      if (seen.has(id)) throw invalidArgument(`${field}.id`, `${field}.id "${id}"${from} is listed twice: give each plugin once`);
      seen.add(id);
      if (options.enabled === false) return;
      const plugin = byId.get(id);
      if (!plugin) {
        const list = supported.length > 0 ? `the supported plugins are ${supported.join(", ")}` : "no plugin is supported yet";
        throw invalidArgument(`${field}.id`, `${field}.id "${id}"${from} is not supported by this deployment (${list}; docs/plugins.md)`);
      }
      runs.push({ plugin, run: { options, field, report: { id } } });
    });
    if (runs.length === 0 && call.track.plugins.length === 0) {
      refuseUnreadableFiles(call, deps.routing?.catalog);
      return next();
    }
    runs.sort((a, b) => a.plugin.order - b.plugin.order);
    for (const { plugin, run } of runs) {
      if (plugin.route) continue; // a router: the routing stage ran it and recorded its report
      call.track.plugins.push(run.report);
      await plugin.before?.(call, run);
    }
    // A `file` part left (no file-parser, engine native) must reach a model that reads it (file-parser.ts).
    refuseUnreadableFiles(call, deps.routing?.catalog);
    let outcome = await next();
    for (let i = runs.length - 1; i >= 0; i--) {
      const { plugin, run } = runs[i]!;
      if (plugin.after) outcome = plugin.after(call, run, outcome);
    }
    const reports = call.track.plugins;
    if (outcome.kind === "completion") return { kind: "completion", completion: { ...outcome.completion, plugins: reports } };
    // Streams: on the first chunk that finishes a choice (the reports are complete by then), else on none.
    let shown = false;
    const events = tapEvents(outcome.events, {
      map: (event) => {
        if (shown || !event.choices.some((c) => c.finish_reason)) return event;
        shown = true;
        return { ...event, plugins: reports };
      },
    });
    return { kind: "stream", events };
  }
}
