/**
 * Plugin "web" (docs/plugins.md): fresh search results for the model. Before the model call Portico searches
 * once through its search engine adapter (../../server-tools/search-engines.ts: SearXNG or Brave, configured by
 * the operator; the same adapters as the web_search server tool), keeps the results the domain filters allow,
 * and gives them to the model in a system message. After the call, the answer's links to those results become
 * `annotations` (`url_citation`) on the message, as the real-world service returns them; streamed, on the
 * chunk that finishes the choice (`delta.annotations`).
 *
 * Native search (engine `native`, or an absent engine on a server with no search engine configured): an attempt
 * whose provider has its own web search (Anthropic's web_search tool, Gemini's google_search, an OpenAI-format
 * model the catalog marks with `web_search_options`) gets the provider's tool instead of Portico's results
 * (`UpstreamCall.webSearch`, ../../providers/native-search.ts), and the provider's citations come back as the same
 * `url_citation` annotations. An option the provider's tool cannot honour is a 400 naming it; an attempt whose
 * provider has no native search uses Portico's engine (400 naming `engine` when none is configured).
 *
 * Fields: `engine` (native: above; searxng or brave: that engine, 400 when it is not configured; absent: the
 * configured one, else native; the description's exa, firecrawl, parallel and perplexity: 400), `max_results` (1–20, default 5),
 * `include_domains` / `exclude_domains` (host names, `*` wildcards, an optional path prefix), `user_location`
 * (passed to engines that take one, Brave; with SearXNG a 400 naming it), `search_prompt` (the text put before
 * the results, as the real-world service uses it; the query is the last user message), `max_uses` (the plugin
 * searches once per request, which every allowed value (≥ 1) permits). `mode` and `x_search` are refused.
 *
 * The report: `engine`, `queries` (0 or 1), `results` (kept), `citations` (annotations returned). Never content.
 */
import type { ServerToolsConfig } from "../../../../config.js";
import { invalidArgument } from "../../../errors.js";
import { contentText } from "../../providers/http.js";
import { configuredEngine, namedEngine, SearchFailed, type SearchEngine, type SearchLocation, type SearchResult } from "../../server-tools/search-engines.js";
import type { Attempt, ChatCall } from "../stage.js";
import type { Catalog } from "../../../catalog/catalog.js";
import type { NativeWebSearch } from "../../providers/native-search.js";
import { tapEvents } from "../tap.js";
import type { Plugin, PluginRun } from "./types.js";
import type { ChatOutcome } from "../stage.js";
import { serviceError, Reason } from "../../../errors.js";

/** The real-world service's default prompt before the results. */
export const DEFAULT_SEARCH_PROMPT =
  "A web search was conducted on {date}. Incorporate the following web search results into your response.\n\n" +
  "IMPORTANT: Cite them using markdown links named using the domain of the source.\nExample: [nytimes.com](https://nytimes.com/some-page).";

/** Most characters of the last user message used as the query. */
const MAX_QUERY_CHARS = 400;
const MAX_RESULTS = 20;

/** One include/exclude pattern: a host glob and an optional path prefix glob. */
export interface DomainPattern {
  host: RegExp;
  path?: RegExp;
}

const globToRegex = (glob: string) => glob.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*");

/**
 * `example.com` (and its subdomains), `*.example.com` (subdomains only), `news.*`, `example.com/docs` (paths
 * under /docs), `example.com/*\/2025` (wildcards in the path). A scheme in front is ignored.
 */
export function parseDomainPattern(raw: string): DomainPattern | undefined {
  const text = raw.trim().toLowerCase().replace(/^https?:\/\//, "");
  if (text === "" || /\s/.test(text)) return undefined;
  const slash = text.indexOf("/");
  const host = (slash < 0 ? text : text.slice(0, slash)).replace(/\.$/, "");
  const path = slash < 0 ? undefined : text.slice(slash);
  if (host === "" || !/^[a-z0-9.*:_-]+$/.test(host)) return undefined;
  const hostRe = host.includes("*") ? new RegExp(`^${globToRegex(host)}$`) : new RegExp(`^(?:.*\\.)?${globToRegex(host)}$`);
  const out: DomainPattern = { host: hostRe };
  if (path && path !== "/") out.path = new RegExp(`^${globToRegex(path.replace(/\/$/, ""))}(?:[/?#].*)?$`);
  return out;
}

export function matchesPattern(url: URL, p: DomainPattern): boolean {
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if (!p.host.test(host)) return false;
  return p.path ? p.path.test(url.pathname.toLowerCase()) : true;
}

function patterns(run: PluginRun, key: "include_domains" | "exclude_domains"): DomainPattern[] | undefined {
  const v = run.options[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw invalidArgument(`${run.field}.${key}`, `${run.field}.${key} must be an array of domain patterns`);
  return v.map((d, i) => {
    const p = typeof d === "string" ? parseDomainPattern(d) : undefined;
    if (!p) throw invalidArgument(`${run.field}.${key}[${i}]`, `${run.field}.${key}[${i}] is not a domain pattern (a host name, * wildcards, an optional /path)`);
    return p;
  });
}

/** Filters results by the include/exclude patterns. */
export function filterResults(results: SearchResult[], include: DomainPattern[] | undefined, exclude: DomainPattern[] | undefined): SearchResult[] {
  return results.filter((r) => {
    let url: URL;
    try {
      url = new URL(r.url);
    } catch {
      return false;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    if (exclude?.some((p) => matchesPattern(url, p))) return false;
    if (include?.length && !include.some((p) => matchesPattern(url, p))) return false;
    return true;
  });
}

export interface UrlCitation {
  type: "url_citation";
  url_citation: { url: string; title: string; content?: string; start_index: number; end_index: number };
}

/**
 * The answer's citations of the results: for each result the answer links to (a markdown link `[text](url)`,
 * else the bare URL), one `url_citation` whose start/end index span that link in the content (UTF-16 indices,
 * as JavaScript and the OpenAI SDKs count). Results the answer does not cite are not annotations.
 */
export function citationsOf(content: string, results: SearchResult[]): UrlCitation[] {
  const out: UrlCitation[] = [];
  for (const r of results) {
    const variants = [r.url, r.url.replace(/\/$/, "")].filter((u, i, a) => u !== "" && a.indexOf(u) === i);
    let span: [number, number] | undefined;
    for (const u of variants) {
      const link = content.indexOf(`](${u})`);
      if (link >= 0) {
        const open = content.lastIndexOf("[", link);
        span = [open >= 0 ? open : link, link + u.length + 3];
        break;
      }
      const bare = content.indexOf(u);
      if (bare >= 0) {
        span = [bare, bare + u.length];
        break;
      }
    }
    if (!span) continue;
    out.push({ type: "url_citation", url_citation: { url: r.url, title: r.title, ...(r.snippet ? { content: r.snippet } : {}), start_index: span[0], end_index: span[1] } });
  }
  return out.sort((a, b) => a.url_citation.start_index - b.url_citation.start_index);
}

function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return "";
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown };
    if (m?.role === "user") return contentText(m.content).trim();
  }
  return "";
}

function resultsMessage(prompt: string, results: SearchResult[]): string {
  const head = prompt.replaceAll("{date}", new Date().toISOString().slice(0, 10));
  const body = results.map((r, i) => `[${i + 1}] ${r.title || r.url}\nURL: ${r.url}\n${r.snippet}`.trim()).join("\n\n");
  return `${head}\n\n${body}`;
}

function locationOf(run: PluginRun): SearchLocation | undefined {
  const v = run.options.user_location as Record<string, unknown> | null | undefined;
  if (!v) return undefined;
  const out: SearchLocation = {};
  for (const k of ["city", "country", "region", "timezone"] as const) if (typeof v[k] === "string" && v[k] !== "") out[k] = v[k] as string;
  return out;
}

interface WebState {
  run: PluginRun;
  results: SearchResult[];
  /** The attempts that search with their provider's own tool. */
  native: Set<Attempt>;
}

/** Which native web search an attempt's provider has (docs/plugins.md, "Native search"); undefined: none. */
export function nativeSearchOf(a: Attempt, catalog: Catalog | undefined): "anthropic" | "gemini" | "openai" | undefined {
  if (a.adapter.format === "anthropic") return "anthropic";
  if (a.adapter.format === "gemini") return "gemini";
  // OpenAI's chat completions search only with its search models: the catalog says which (`web_search_options`).
  const match = catalog?.resolve(a.requestedModel, a.provider, a.call.model);
  const params = match?.endpoint.supported_parameters ?? match?.model.supported_parameters ?? [];
  return params.includes("web_search_options") ? "openai" : undefined;
}

const PROVIDER_NAMES = { anthropic: "Anthropic's web search tool", gemini: "Gemini's Google Search grounding", openai: "the OpenAI search models' web_search_options" } as const;

/**
 * The native search of one flavour for the plugin's options: a 400 naming the first option that flavour's tool
 * cannot honour (never silently dropped).
 */
function nativeOptions(run: PluginRun, flavour: keyof typeof PROVIDER_NAMES, model: string): NativeWebSearch {
  const o = run.options;
  const set = (k: string) => o[k] !== undefined && o[k] !== null && !(Array.isArray(o[k]) && (o[k] as unknown[]).length === 0);
  const refuse = (k: string, why: string): never => {
    throw invalidArgument(`${run.field}.${k}`, `${run.field}.${k} cannot be honoured by ${PROVIDER_NAMES[flavour]} (${model}), which the native engine uses: ${why} (omit it, or name engine searxng or brave; docs/plugins.md)`);
  };
  if (set("max_results")) refuse("max_results", "it takes no result count");
  if (set("search_prompt")) refuse("search_prompt", "the provider gives the results to the model itself");
  const out: NativeWebSearch = { askedBy: run.field };
  const location = locationOf(run);
  if (flavour === "anthropic") {
    if (typeof o.max_uses === "number") out.maxUses = o.max_uses;
    if (set("include_domains") && set("exclude_domains")) refuse("exclude_domains", "it takes allowed or blocked domains, not both");
    for (const key of ["include_domains", "exclude_domains"] as const) {
      if (!set(key)) continue;
      const list = (o[key] as unknown[]).map((d, i) => {
        const text = String(d).trim().toLowerCase().replace(/^https?:\/\//, "");
        const host = text.split("/")[0]!;
        if (host.includes("*")) refuse(`${key}[${i}]`, "its domains take no wildcard in the host name");
        return text;
      });
      if (key === "include_domains") out.allowedDomains = list;
      else out.blockedDomains = list;
    }
    if (location) out.userLocation = location;
    return out;
  }
  for (const k of ["max_uses", "include_domains", "exclude_domains"]) if (set(k)) refuse(k, k === "max_uses" ? "it takes no search count" : "it takes no domain filter");
  if (location) {
    if (flavour === "gemini") refuse("user_location", "it takes no location");
    out.userLocation = location;
  }
  return out;
}

export function createWebPlugin(search: ServerToolsConfig["search"] | undefined, catalog?: Catalog): Plugin {
  const states = new WeakMap<ChatCall, WebState>();

  function engineFor(run: PluginRun): SearchEngine {
    const wanted = run.options.engine === "native" ? undefined : run.options.engine;
    const field = `${run.field}.engine`;
    if (!search) throw invalidArgument(`${run.field}.id`, `${run.field}.id "web" cannot run: no search engine is configured on this server (the operator sets PORTICO_SEARXNG_URL or PORTICO_BRAVE_SEARCH_API_KEY)`);
    const engine = wanted === "searxng" || wanted === "brave" ? namedEngine(search, wanted) : configuredEngine(search);
    if ("missing" in engine) {
      throw invalidArgument(typeof wanted === "string" ? field : `${run.field}.id`, `${typeof wanted === "string" ? field : `${run.field}.id "web"`} cannot run: ${engine.missing}`);
    }
    return engine;
  }

  return {
    id: "web",
    order: 12,
    async before(call, run) {
      for (const key of ["mode", "x_search"] as const) {
        if (run.options[key] !== undefined && run.options[key] !== null) {
          throw invalidArgument(`${run.field}.${key}`, `${run.field}.${key} is not supported: Portico's search engines have no ${key === "mode" ? "search modes" : "X search"} (docs/plugins.md)`);
        }
      }
      const wanted = run.options.engine;
      const field = `${run.field}.engine`;
      if (typeof wanted === "string" && wanted !== "searxng" && wanted !== "brave" && wanted !== "native") {
        throw invalidArgument(field, `${field} "${wanted}" is not offered by this deployment: its engines are native, searxng and brave (docs/plugins.md)`);
      }
      // Native search: asked for, or the default when this server has no search engine of its own.
      const engineConfigured = Boolean(search) && !("missing" in configuredEngine(search!));
      const native = new Set<Attempt>();
      if (wanted === "native" || (wanted === undefined && !engineConfigured)) {
        for (const a of call.attempts) {
          const flavour = nativeSearchOf(a, catalog);
          if (!flavour) {
            if (!engineConfigured) {
              throw invalidArgument(wanted === "native" ? field : `${run.field}.id`, `${wanted === "native" ? `${field} "native"` : `${run.field}.id "web"`} cannot run for ${a.requestedModel} on ${a.provider}: that provider has no native web search, and no search engine is configured on this server (the operator sets PORTICO_SEARXNG_URL or PORTICO_BRAVE_SEARCH_API_KEY; docs/plugins.md)`);
            }
            continue;
          }
          a.call = { ...a.call, webSearch: nativeOptions(run, flavour, a.requestedModel) };
          native.add(a);
        }
      }
      run.report.engine = native.size > 0 && native.size === call.attempts.length ? "native" : undefined;
      if (native.size > 0 && native.size < call.attempts.length) run.report.native_attempts = native.size;
      if (native.size > 0 && native.size === call.attempts.length) {
        run.report.queries = 0;
        states.set(call, { run, results: [], native });
        return;
      }
      const engine = engineFor(run);
      const maxResults = (run.options.max_results as number | undefined) ?? 5;
      if (maxResults > MAX_RESULTS) throw invalidArgument(`${run.field}.max_results`, `${run.field}.max_results must be at most ${MAX_RESULTS}`);
      const include = patterns(run, "include_domains");
      const exclude = patterns(run, "exclude_domains");
      const location = locationOf(run);
      if (location && !engine.takesLocation) {
        throw invalidArgument(`${run.field}.user_location`, `${run.field}.user_location cannot be honoured: the ${engine.name} search engine takes no location (brave does; docs/plugins.md)`);
      }
      const prompt = run.options.search_prompt;
      run.report.engine = native.size > 0 ? `native+${engine.name}` : engine.name;
      const query = lastUserText(call.request.messages).slice(0, MAX_QUERY_CHARS);
      if (query === "") {
        run.report.queries = 0;
        run.report.results = 0;
        run.report.skipped = "no user message text to search for";
        if (native.size > 0) states.set(call, { run, results: [], native });
        return;
      }
      const filtered = Boolean(include?.length || exclude?.length);
      let found: SearchResult[];
      try {
        found = await engine.search({ query, count: filtered ? Math.min(50, maxResults * 3) : maxResults, signal: call.signal, ...(location ? { location } : {}) });
      } catch (err) {
        if (err instanceof SearchFailed) throw serviceError(Reason.UPSTREAM_FAILED, `The web plugin's search failed: ${err.message}`, { retryable: true });
        throw err;
      }
      const results = filterResults(found, include, exclude).slice(0, maxResults);
      run.report.queries = 1;
      run.report.results = results.length;
      if (results.length === 0) {
        if (native.size > 0) states.set(call, { run, results: [], native });
        return;
      }
      const injected = { role: "system", content: resultsMessage(typeof prompt === "string" && prompt !== "" ? prompt : DEFAULT_SEARCH_PROMPT, results) };
      const withResults = (source: unknown) => {
        const messages = Array.isArray(source) ? [...(source as Array<Record<string, unknown>>)] : [];
        // After the leading system/developer messages, so a provider that hoists the system prompt keeps its order.
        let at = 0;
        while (at < messages.length && (messages[at]!.role === "system" || messages[at]!.role === "developer")) at++;
        messages.splice(at, 0, injected);
        return messages;
      };
      // Each attempt's own messages (file-parser, which may run first, can have changed them).
      const done = new Map<unknown, unknown[]>();
      for (const a of call.attempts) {
        if (native.has(a)) continue; // the provider searches itself
        const source = a.call.body.messages ?? call.request.messages;
        const messages = done.get(source) ?? done.set(source, withResults(source)).get(source)!;
        a.call = { ...a.call, body: { ...a.call.body, messages: messages as typeof a.call.body.messages } };
      }
      call.request = { ...call.request, messages: withResults(call.request.messages) as typeof call.request.messages };
      states.set(call, { run, results, native });
    },
    after(call, run, outcome) {
      const state = states.get(call);
      if (!state) return outcome;
      const served = call.attempts.find((a) => a.provider === call.track.provider && a.credentialId === call.track.credentialId && a.requestedModel === call.track.model);
      if (served && state.native.has(served)) return nativeCitations(run, outcome);
      if (outcome.kind === "completion") {
        let cited = 0;
        const choices = outcome.completion.choices.map((c) => {
          const content = contentText((c.message as { content?: unknown }).content);
          const annotations = citationsOf(content, state.results);
          cited += annotations.length;
          return annotations.length > 0 ? { ...c, message: { ...c.message, annotations } } : c;
        });
        run.report.citations = cited;
        return { kind: "completion", completion: { ...outcome.completion, choices } as typeof outcome.completion };
      }
      const texts = new Map<number, string>();
      let cited = 0;
      run.report.citations = 0;
      const events = tapEvents(outcome.events, {
        map: (event) => {
          let changed = false;
          const choices = event.choices.map((c) => {
            const piece = (c.delta as { content?: unknown } | undefined)?.content;
            if (typeof piece === "string") texts.set(c.index, (texts.get(c.index) ?? "") + piece);
            if (!c.finish_reason) return c;
            const annotations = citationsOf(texts.get(c.index) ?? "", state.results);
            if (annotations.length === 0) return c;
            cited += annotations.length;
            run.report.citations = cited;
            changed = true;
            return { ...c, delta: { ...c.delta, annotations } };
          });
          return changed ? ({ ...event, choices } as typeof event) : event;
        },
      });
      return { kind: "stream", events };
    },
  };
}

/**
 * An answer a native search served: the provider's citations are already `url_citation` annotations (the adapters
 * translate them); streamed, every `delta.annotations` of a choice is moved to the chunk that finishes it, where
 * Portico's own citations are. The report counts them.
 */
function nativeCitations(run: PluginRun, outcome: ChatOutcome): ChatOutcome {
  run.report.served_by = "native";
  if (outcome.kind === "completion") {
    run.report.citations = outcome.completion.choices.reduce((n, c) => n + ((c.message as { annotations?: unknown[] }).annotations?.length ?? 0), 0);
    return outcome;
  }
  run.report.citations = 0;
  const held = new Map<number, unknown[]>();
  const events = tapEvents(outcome.events, {
    map: (event) => {
      let changed = false;
      const choices = event.choices.map((c) => {
        const delta = c.delta as { annotations?: unknown[] } | undefined;
        if (!delta?.annotations && !c.finish_reason) return c;
        const list = held.get(c.index) ?? [];
        if (Array.isArray(delta?.annotations)) list.push(...delta.annotations);
        held.set(c.index, list);
        changed = true;
        const { annotations: _a, ...rest } = (c.delta ?? {}) as Record<string, unknown>;
        if (!c.finish_reason || list.length === 0) return { ...c, delta: rest };
        run.report.citations = (run.report.citations as number) + list.length;
        held.delete(c.index);
        return { ...c, delta: { ...rest, annotations: list } };
      });
      return changed ? ({ ...event, choices } as typeof event) : event;
    },
  });
  return { kind: "stream", events };
}
