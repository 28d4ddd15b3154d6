/**
 * The server tools Portico runs (docs/plugins.md, "Server tools"): each is offered to the model as a function
 * tool, checks its `parameters` when the request arrives (a 400 naming the field), and runs one call of the
 * model into a result text (JSON) the model reads. A failing call is a result too (`{"error": …}`): the model
 * sees why and may answer anyway; nothing of it leaks a secret.
 */
import type { Catalog } from "../../catalog/catalog.js";
import { invalidArgument } from "../../errors.js";
import type { ServerToolsConfig } from "../../../config.js";
import { FetchRefused, type GuardedFetcher } from "./guarded-fetch.js";
import { pageText } from "./page-text.js";
import { configuredEngine, SearchFailed, type SearchEngine } from "./search-engines.js";
import { hostMatches } from "./guarded-fetch.js";
import type { ServerToolKind } from "./kinds.js";
import type { ChatCall } from "../pipeline/stage.js";
import type { CanonicalRequest } from "../model.js";
import { judgePrompt, noAnswer, refuseNestedFusion, type FusionRunner } from "../pipeline/plugins/fusion.js";
import { onFirstUse } from "../../../lib/on-first-use.js";

/** The o200k tokenizer's tables (≈ 20 MB of heap) are loaded with the first fetched page, not at start-up. */
const tokenizer = onFirstUse([import.meta.resolve("gpt-tokenizer")], () => import("gpt-tokenizer"));

/** What a tool needs to run. */
export interface ToolDeps {
  catalog: Catalog;
  config: ServerToolsConfig;
  fetcher: GuardedFetcher;
  /** The fusion plugin's runner (the fusion server tool runs the same panel and judge); absent: fusion is not offered. */
  fusion?: FusionRunner;
  brand?: string;
  /** The request the tool serves (the fusion tool's nested calls are made on its behalf). */
  call?: ChatCall;
}

/** One server tool of a request, ready to offer and run. */
export interface ActiveTool {
  kind: ServerToolKind;
  /** The type as the request wrote it (`service:web_search`, `web_search_preview`). */
  type: string;
  /** The function name offered to the model. */
  name: string;
  /** The function tool offered to the model. */
  definition: { type: "function"; function: { name: string; description: string; parameters: Record<string, unknown> } };
  /** Most calls this request (`max_uses`); past it a call returns an error result. */
  maxUses?: number;
  run(args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult>;
}

export interface ToolResult {
  ok: boolean;
  /** The text the model reads (JSON). */
  content: string;
  /** A short line for stream progress and the record (never page content). */
  summary: string;
}

/** The function name each kind is offered under. */
export const FUNCTION_NAMES: Readonly<Partial<Record<ServerToolKind, string>>> = {
  datetime: "datetime",
  web_search: "web_search",
  web_fetch: "web_fetch",
  fusion: "fusion",
  experimental__search_models: "search_models",
};

type Params = Record<string, unknown>;

const fail = (field: string, msg: string) => invalidArgument(field, `${field} ${msg}`);

function checkKeys(params: Params, allowed: readonly string[], field: string, kind: string): void {
  for (const key of Object.keys(params)) {
    if (!allowed.includes(key)) {
      throw fail(`${field}.${key}`, `is not supported for the ${kind} server tool (supported: ${allowed.join(", ") || "none"})`);
    }
  }
}
function optInt(params: Params, key: string, field: string, min: number, max: number): number | undefined {
  const v = params[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) throw fail(`${field}.${key}`, `must be an integer from ${min} to ${max}`);
  return v;
}
function optDomains(params: Params, key: string, field: string): string[] | undefined {
  const v = params[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.length > 100 || v.some((d) => typeof d !== "string" || d.trim() === "" || d.length > 253)) {
    throw fail(`${field}.${key}`, "must be an array of at most 100 domain names");
  }
  return v as string[];
}
function engineAuto(params: Params, field: string, kind: string): void {
  const v = params.engine;
  if (v === undefined || v === null || v === "auto") return;
  throw fail(`${field}.engine`, `"${String(v)}" is not offered: Portico runs ${kind} itself (engine "auto" or absent)`);
}

async function truncateTokens(text: string, maxTokens: number): Promise<{ text: string; truncated: boolean }> {
  // Cut the text first (a token is rarely more than 8 characters), so encoding stays cheap on a long page.
  const cut = text.length > maxTokens * 8 ? text.slice(0, maxTokens * 8) : text;
  const { encode, decode } = await tokenizer();
  const tokens = encode(cut);
  if (tokens.length <= maxTokens && cut.length === text.length) return { text, truncated: false };
  if (tokens.length <= maxTokens) return { text: cut, truncated: true };
  return { text: decode(tokens.slice(0, maxTokens)), truncated: true };
}

const json = (v: unknown) => JSON.stringify(v);
const errorResult = (message: string): ToolResult => ({ ok: false, content: json({ error: message }), summary: message });

/** Builds the active tool for one `tools[]` entry; throws a 400 naming the field for a bad parameter. */
export function activate(kind: ServerToolKind, type: string, params: Params, field: string, deps: ToolDeps): ActiveTool {
  const name = FUNCTION_NAMES[kind]!;
  switch (kind) {
    case "datetime": {
      checkKeys(params, ["timezone"], field, kind);
      const tz = params.timezone ?? "UTC";
      if (typeof tz !== "string" || !validZone(tz)) throw fail(`${field}.timezone`, "must be an IANA time zone name such as Europe/Paris or UTC");
      return {
        kind, type, name,
        definition: fn(name, "The current date and time. Optionally in another IANA time zone.", {
          timezone: { type: "string", description: `IANA time zone name (default ${tz})` },
        }),
        async run(args) {
          const zone = typeof args.timezone === "string" && args.timezone !== "" ? args.timezone : tz;
          if (!validZone(zone)) return errorResult(`unknown time zone ${JSON.stringify(zone).slice(0, 80)}`);
          const now = new Date();
          const local = new Intl.DateTimeFormat("en-CA", {
            timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, weekday: "long",
          }).formatToParts(now);
          const part = (t: string) => local.find((p) => p.type === t)?.value ?? "";
          const text = `${part("year")}-${part("month")}-${part("day")} ${part("hour")}:${part("minute")}:${part("second")}`;
          return { ok: true, content: json({ utc: now.toISOString(), timezone: zone, local: text, weekday: part("weekday"), unix: Math.floor(now.getTime() / 1000) }), summary: `${text} ${zone}` };
        },
      };
    }
    case "experimental__search_models": {
      checkKeys(params, ["max_results"], field, kind);
      const max = optInt(params, "max_results", field, 1, 50) ?? 5;
      return {
        kind, type, name,
        definition: fn(name, "Search the model catalog of this gateway by words (name, vendor, capability). Returns model ids with context length and prices per million tokens.", {
          query: { type: "string", description: "Words to look for, e.g. 'claude sonnet' or 'vision'" },
        }, ["query"]),
        async run(args) {
          const query = typeof args.query === "string" ? args.query : "";
          const words = query.toLowerCase().split(/[\s,/]+/).filter(Boolean);
          const scored = deps.catalog.models().map((m) => {
            const hay = `${m.slug} ${m.name} ${m.description ?? ""} ${m.architecture.input_modalities.join(" ")}`.toLowerCase();
            return { m, score: words.reduce((s, w) => s + (hay.includes(w) ? 1 : 0), 0) };
          }).filter((x) => words.length === 0 || x.score > 0).sort((a, b) => b.score - a.score || (a.m.slug < b.m.slug ? -1 : 1)).slice(0, max);
          const models = scored.map(({ m }) => {
            const e = m.endpoints.find((x) => x.status !== "disabled");
            const perM = (p: string | undefined) => (p === undefined ? null : Number((Number(p) * 1e6).toFixed(6)));
            return {
              id: m.slug, name: m.name, context_length: m.context_length,
              input_modalities: m.architecture.input_modalities,
              ...(e ? { prompt_usd_per_million: perM(e.pricing.prompt), completion_usd_per_million: perM(e.pricing.completion) } : {}),
            };
          });
          return { ok: true, content: json({ query, models }), summary: `${models.length} model${models.length === 1 ? "" : "s"}` };
        },
      };
    }
    case "web_fetch": {
      checkKeys(params, ["engine", "max_uses", "max_content_tokens", "allowed_domains", "blocked_domains"], field, kind);
      engineAuto(params, field, kind);
      const maxUses = optInt(params, "max_uses", field, 1, 100);
      const maxTokens = optInt(params, "max_content_tokens", field, 1, 1_000_000) ?? 25_000;
      const allowedDomains = optDomains(params, "allowed_domains", field);
      const blockedDomains = optDomains(params, "blocked_domains", field);
      return {
        kind, type, name, ...(maxUses !== undefined ? { maxUses } : {}),
        definition: fn(name, "Fetch a web page (http or https URL) and return its main content as markdown.", {
          url: { type: "string", description: "The absolute http(s) URL to fetch" },
        }, ["url"]),
        async run(args, signal) {
          const url = typeof args.url === "string" ? args.url : "";
          try {
            const page = await deps.fetcher.fetchPage(url, { ...(allowedDomains ? { allowedDomains } : {}), ...(blockedDomains ? { blockedDomains } : {}) }, signal);
            const { title, text } = await pageText(page.body, page.contentType, page.finalUrl);
            const cut = await truncateTokens(text, maxTokens);
            return {
              ok: page.status < 400,
              content: json({ url: page.url, final_url: page.finalUrl, status: page.status, content_type: page.contentType, title, content: cut.text, truncated: cut.truncated || page.truncated }),
              summary: `${page.status} ${page.finalUrl}`,
            };
          } catch (err) {
            if (err instanceof FetchRefused) return errorResult(`web_fetch refused ${url.slice(0, 200)}: ${err.message}`);
            throw err;
          }
        },
      };
    }
    case "web_search": {
      checkKeys(params, ["engine", "max_results", "max_total_results", "max_uses", "allowed_domains", "excluded_domains"], field, kind);
      engineAuto(params, field, kind);
      const engine = configuredEngine(deps.config.search);
      if ("missing" in engine) throw invalidArgument(field.replace(/\.parameters$/, ".type"), `The ${type} server tool cannot run: ${engine.missing}`);
      const maxResults = optInt(params, "max_results", field, 1, 20) ?? 5;
      const maxTotal = optInt(params, "max_total_results", field, 1, 1000);
      const maxUses = optInt(params, "max_uses", field, 1, 100);
      const allowed = optDomains(params, "allowed_domains", field);
      const excluded = optDomains(params, "excluded_domains", field);
      let total = 0;
      return {
        kind, type, name, ...(maxUses !== undefined ? { maxUses } : {}),
        definition: fn(name, "Search the web. Returns result titles, URLs and snippets.", {
          query: { type: "string", description: "The search query" },
        }, ["query"]),
        async run(args, signal) {
          const query = typeof args.query === "string" ? args.query.trim() : "";
          if (query === "") return errorResult("web_search needs a non-empty query");
          if (maxTotal !== undefined && total >= maxTotal) return errorResult(`max_total_results (${maxTotal}) reached`);
          return searchOnce(engine, query, maxResults, allowed, excluded, signal).then((r) => {
            const kept = maxTotal !== undefined ? r.slice(0, maxTotal - total) : r;
            total += kept.length;
            return { ok: true, content: json({ query, engine: engine.name, results: kept }), summary: `${kept.length} result${kept.length === 1 ? "" : "s"} for "${query.slice(0, 80)}"` };
          }, (err: unknown) => {
            if (err instanceof SearchFailed) return errorResult(err.message);
            throw err;
          });
        },
      };
    }
    case "fusion":
      return fusionTool(type, name, params, field, deps);
    default:
      throw new Error(`no runner for server tool kind ${kind}`);
  }
}

/**
 * The fusion server tool (docs/plugins.md, "The fusion server tool"): the model asks a question, a panel answers it
 * in parallel and a judge writes one answer, which is the tool's result. The same runner as the fusion plugin
 * (nested calls through the request's own server-tools, plan and execute stages); usage and cost join the request's.
 */
function fusionTool(type: string, name: string, params: Params, field: string, deps: ToolDeps): ActiveTool {
  const { fusion, call } = deps;
  if (!fusion || !call) throw fail(`${field.replace(/\.parameters$/, "")}.type`, "is not available here: the fusion server tool runs in POST /api/v1/chat/completions");
  checkKeys(params, ["analysis_models", "model", "max_tool_calls", "max_completion_tokens", "temperature", "reasoning", "tools"], field, "fusion");
  const raw = params.analysis_models;
  const models = Array.isArray(raw) ? (raw as unknown[]) : undefined;
  if (!models || models.length < 1 || models.length > 8) throw fail(`${field}.analysis_models`, "must list 1 to 8 model ids (the fusion server tool has no built-in panel)");
  models.forEach((m, j) => {
    if (typeof m !== "string" || !/^[^/\s]+\/[^\s]+$/.test(m)) throw fail(`${field}.analysis_models[${j}]`, "must be a model id such as openai/gpt-4o");
  });
  const judge = params.model ?? call.request.model;
  if (typeof judge !== "string" || !/^[^/\s]+\/[^\s]+$/.test(judge)) throw fail(`${field}.model`, "must be a model id such as openai/gpt-4o");
  const maxToolCalls = optInt(params, "max_tool_calls", field, 1, 16) ?? 8;
  const maxTokens = optInt(params, "max_completion_tokens", field, 1, 1_000_000);
  const temperature = params.temperature;
  if (temperature !== undefined && (typeof temperature !== "number" || temperature < 0 || temperature > 2)) throw fail(`${field}.temperature`, "must be a number from 0 to 2");
  const reasoning = params.reasoning;
  if (reasoning !== undefined && (typeof reasoning !== "object" || reasoning === null || Array.isArray(reasoning))) throw fail(`${field}.reasoning`, "must be an object");
  const tools = params.tools === undefined ? [] : (params.tools as Array<Record<string, unknown>>);
  if (!Array.isArray(tools) || tools.length > 8) throw fail(`${field}.tools`, "must be an array of at most 8 server tools");
  refuseNestedFusion(tools, `${field}.tools`, deps.brand ?? "service");
  const sampling = {
    ...(maxTokens !== undefined ? { max_completion_tokens: maxTokens } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(reasoning !== undefined ? { reasoning } : {}),
  };
  return {
    kind: "fusion", type, name,
    definition: fn(name, "Ask a panel of models the same question in parallel and get one answer a judge model synthesised from theirs. Use for hard questions where several independent opinions help.", {
      question: { type: "string", description: "The question, self-contained: the panel does not see this conversation" },
    }, ["question"]),
    async run(args) {
      const question = typeof args.question === "string" ? args.question.trim() : "";
      if (question === "") return errorResult("question is required");
      const messages = [{ role: "user", content: question }];
      const base = { model: judge, messages, ...sampling, ...(tools.length > 0 ? { tools } : {}) } as CanonicalRequest;
      try {
        const result = await fusion.panel(call, { models: models as string[], base, maxToolCalls, field, fromExplicit: true });
        const panel = result.members.map((m) => ({ model: m.model, ok: m.ok }));
        if (result.answers.length === 0) return { ...errorResult(noAnswer(result).rawMessage), content: json({ error: noAnswer(result).rawMessage, panel }) };
        const answer = await fusion.ask(call, judge, { model: judge, messages: [...messages, { role: "user", content: judgePrompt(result.answers) }], ...sampling } as CanonicalRequest);
        if (answer.text === "") return errorResult("the judge gave no text answer");
        return { ok: true, content: json({ answer: answer.text, panel }), summary: `${result.answers.length} of ${models.length} panel models answered; judge ${judge}` };
      } catch (err) {
        if (call.signal.aborted) throw err;
        const message = err instanceof Error ? err.message : "the fusion panel failed";
        return errorResult(message.slice(0, 300));
      }
    },
  };
}

async function searchOnce(engine: SearchEngine, query: string, count: number, allowed: string[] | undefined, excluded: string[] | undefined, signal: AbortSignal) {
  // Ask for more when filtering may drop some.
  const filtered = Boolean(allowed?.length || excluded?.length);
  const results = await engine.search({ query, count: filtered ? Math.min(50, count * 3) : count, signal });
  return results.filter((r) => {
    let host: string;
    try {
      host = new URL(r.url).hostname;
    } catch {
      return false;
    }
    if (excluded?.some((d) => hostMatches(host, d))) return false;
    if (allowed?.length && !allowed.some((d) => hostMatches(host, d))) return false;
    return true;
  }).slice(0, count);
}

function fn(name: string, description: string, properties: Record<string, unknown>, required: string[] = []) {
  return { type: "function" as const, function: { name, description, parameters: { type: "object", properties, required, additionalProperties: false } } };
}

function validZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}
