/**
 * Plugin `fusion` (docs/plugins.md, "fusion"): the request goes to a panel of models in parallel, then a judge
 * model writes one answer from the panel's answers.
 *
 * - The panel: `analysis_models`, else the named `preset` panel (general-high, general-budget, general-fast), else
 *   general-high. The judge: `model`, else the `preset` panel's judge when a preset is named, else the request's
 *   own `model`. The judge replaces the request's model before plan (the `prepare` hook, run by the routing
 *   stage), so the request's own attempts, spend reservation, answer and generation are the judge's.
 * - Each panel member is a nested call through the request's own server-tools, plan and execute stages (a fresh
 *   ChatCall with the caller's identity, signal and budget; none of the outer stages: no record, limits, rate,
 *   cache or plugins), so credentials, the catalog, routing preferences, retries and the server-tool loop apply as
 *   for any request. A member is always non-streamed; the judge answers as the request asked (streamed or not).
 * - The panel's `tools` (default `<brand>:web_search` when a search engine is configured, and `<brand>:web_fetch`;
 *   `[]` disables tools) are server tools run by the member's loop; `max_tool_calls` bounds its tool turns.
 * - A member that fails (an upstream error, no credential) is reported and left out; the judge runs when at least
 *   one member answered, else the request fails with the last member's error (502 upstream_failed when none
 *   answered because of providers). A refusal of the member's request itself (a bad model id, a bad tool) is a
 *   400 naming the plugin's field.
 * - Usage and cost: each answered member's usage and cost go to `track.nested`; the cost stage adds them to the
 *   answer's `usage` (tokens and cost) and the record stage to the generation.
 */
import { ConnectError } from "@connectrpc/connect";
import { errorDetailOf, invalidArgument, Reason, serviceError } from "../../../errors.js";
import { reasonFromWire, ruleOf } from "../../../../contract/reasons.js";
import type { Catalog } from "../../../catalog/catalog.js";
import { usd } from "../../../catalog/cost.js";
import type { CanonicalRequest, PluginReport } from "../../model.js";
import { priceServed, withNestedUsage } from "../cost.js";
import { compose, newCall, type Attempt, type ChatCall, type ChatOutcome, type ChatStage, type NestedCall } from "../stage.js";
import { maxCostOf, outputTokenBound, promptPriceOf } from "../../../spend/max-cost.js";
import type { Plugin, PluginRun } from "./types.js";

/** The built-in panels of `preset` (catalog slugs; docs/plugins.md). */
export const FUSION_PANELS: Readonly<Record<string, { models: readonly string[]; judge: string }>> = {
  "general-high": { models: ["openai/gpt-5", "anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro"], judge: "openai/gpt-5" },
  "general-budget": { models: ["openai/gpt-5-mini", "google/gemini-2.5-flash", "deepseek/deepseek-chat"], judge: "openai/gpt-5-mini" },
  "general-fast": { models: ["openai/gpt-4.1-mini", "google/gemini-2.5-flash-lite", "anthropic/claude-haiku-4.5"], judge: "openai/gpt-4.1-mini" },
};
const DEFAULT_PANEL = "general-high";
const DEFAULT_MAX_TOOL_CALLS = 8;

/** The judge's instructions, appended to the conversation as the last user message (docs/plugins.md quotes it). */
export function judgePrompt(answers: ReadonlyArray<{ model: string; text: string }>): string {
  const blocks = answers.map((a) => `<answer model="${a.model}">\n${a.text}\n</answer>`).join("\n\n");
  return [
    `You are the judge of a panel of ${answers.length} model${answers.length === 1 ? "" : "s"} that answered the conversation above independently.`,
    "Their answers follow, each between <answer model=\"…\"> and </answer>.",
    "",
    blocks,
    "",
    "Write the single best answer to the user's last message: keep what is correct and well supported, resolve disagreements by reasoning about them, drop what is wrong and fill gaps.",
    "Answer the user directly, in the form their request asks for; do not mention the panel, the answers or these instructions.",
  ].join("\n");
}

export interface FusionDeps {
  brand: string;
  catalog: Catalog;
  /** Whether a search engine is configured (the default tools include web_search only then). */
  searchConfigured: boolean;
  /** The request's own stages a panel member runs through (chat-handler.ts). */
  stages: { serverTools: ChatStage; plan: ChatStage; execute: ChatStage };
}

interface Member {
  model: string;
  ok: boolean;
  provider?: string;
  prompt_tokens?: number;
  completion_tokens?: number;
  cost?: number | null;
  error?: { code: number; message: string };
}

const strings = (v: unknown): string[] | undefined => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : undefined);

/** The outcome of one panel run: the members' rows (for the report) and the answers that reached the judge. */
export interface PanelResult {
  members: Member[];
  answers: Array<{ model: string; text: string }>;
  panelCost: bigint;
  lastError: unknown;
}

export interface PanelOptions {
  models: readonly string[];
  /** The request each member gets (its `model` set per member). */
  base: CanonicalRequest;
  maxToolCalls: number;
  /** Where a member's refusal of its own request points: `<field>.analysis_models[<j>]` (or `<field>.preset`), `<field>.tools…`. */
  field: string;
  fromExplicit: boolean;
}

/** Runs panels and judges as nested calls through the request's own server-tools, plan and execute stages. */
export interface FusionRunner {
  /**
   * The largest cost the panel can add to the request (femto-USD, platform-paid calls only; docs/plugins.md,
   * "fusion", "Spend limits"): per member, its planned attempts' largest single-call cost (max-cost.ts), and what
   * the members' answers can add to the judge's prompt at the judge's highest prompt price. Plans each member
   * (its server-tools and plan stages, no call); a member that cannot be planned counts 0 (it will fail as a
   * member); one the catalog cannot price (not BYOK-served) is a 400 naming its entry.
   */
  panelBound(call: ChatCall, opts: PanelOptions): Promise<bigint>;
  panel(call: ChatCall, opts: PanelOptions): Promise<PanelResult>;
  /** One non-streamed nested call of `model` on `base` (the server tool's judge); its usage and cost join the request's. */
  ask(call: ChatCall, model: string, base: CanonicalRequest): Promise<{ text: string; member: Member }>;
}

export function createFusionRunner(deps: FusionDeps): FusionRunner {
  const nested = (call: ChatCall, maxToolCalls: number) => {
    // The turn bound of the member's server-tool loop: its tool turns at most max_tool_calls, then an answer.
    const bound: ChatStage = {
      name: "fusion-bound",
      run(c, next) {
        if (c.serverTools) c.serverTools.maxTurns = Math.min(c.serverTools.maxTurns, maxToolCalls + 1);
        return next();
      },
    };
    return compose([deps.stages.serverTools, bound, deps.stages.plan, deps.stages.execute])(call);
  };

  /** A member's refusal of its own request (not a provider's failure) is the caller's to fix: 400 naming the plugin's field. */
  const refusal = (err: unknown, opts: PanelOptions, index: number): ConnectError | undefined => {
    if (!(err instanceof ConnectError)) return undefined;
    const field = errorDetailOf(err)?.field;
    // bad_request only: no credential (no_credential, also 400) is a member's failure, reported.
    if (!field || errorDetailOf(err)?.reason !== ruleOf(Reason.BAD_REQUEST).wire) return undefined;
    if (/^tools\[\d+\]/.test(field)) return invalidArgument(`${opts.field}.${field}`, `${opts.field}.${field}: ${err.rawMessage}`);
    const at = opts.fromExplicit ? `${opts.field}.analysis_models[${index}]` : `${opts.field}.preset`;
    return invalidArgument(at, `${at}: ${err.rawMessage}`);
  };

  /** One nested call; its usage and cost are added to the request's (`track.nested`). */
  async function one(call: ChatCall, model: string, base: CanonicalRequest, maxToolCalls: number) {
    const sub = newCall(call.caller, call.signal, false, { ...base, model } as CanonicalRequest, call.budgetMs);
    sub.track.presetSlug = call.track.presetSlug;
    let outcome;
    try {
      outcome = await nested(sub, maxToolCalls);
    } finally {
      call.track.attempts += sub.track.attempts;
      call.track.upstreamMs += sub.track.upstreamMs;
    }
    if (outcome.kind !== "completion") throw new Error("a fusion nested call answered with a stream");
    const completion = outcome.completion;
    const text = contentOf(completion.choices[0]?.message?.content);
    const own = completion.usage ?? sub.track.usage ?? undefined;
    let cost: NestedCall["cost"] = null;
    // The member's earlier tool turns (its server-tool loop put them on its own track.nested, each priced at the
    // endpoint that served it) join the request's as they are; the member's row sums them with its last turn.
    const turns = sub.track.nested;
    call.track.nested.push(...turns);
    if (own) {
      const parts = priceServed(deps.catalog, sub, own);
      cost = parts ? { prompt: parts.prompt + parts.cacheRead + parts.cacheWrite + parts.request + parts.image + parts.webSearch, completion: parts.completion, total: parts.total } : null;
      call.track.nested.push({ usage: own, cost, paidBy: sub.track.credentialSource === "byok" ? "byok" : "platform" });
      for (const t of turns) {
        if (!cost || !t.cost) continue;
        cost = { prompt: cost.prompt + t.cost.prompt, completion: cost.completion + t.cost.completion, total: cost.total + t.cost.total };
      }
    }
    const usage = own ? withNestedUsage(sub.track, own) : undefined;
    const member: Member = {
      model,
      ok: text !== "",
      ...(sub.track.provider ? { provider: sub.track.provider } : {}),
      prompt_tokens: usage?.prompt_tokens ?? 0,
      completion_tokens: usage?.completion_tokens ?? 0,
      cost: cost ? usd(cost.total) : null,
    };
    if (text === "") member.error = { code: 502, message: "no text answer" };
    return { text, member, cost };
  }

  /** The member's planned attempts (its server-tools and plan stages only, nothing sent). */
  async function planOf(call: ChatCall, model: string, base: CanonicalRequest, maxToolCalls: number): Promise<Attempt[]> {
    const sub = newCall(call.caller, call.signal, false, { ...base, model } as CanonicalRequest, call.budgetMs);
    let attempts: Attempt[] = [];
    const capture: ChatStage = {
      name: "fusion-plan",
      async run(c) {
        attempts = c.attempts;
        return { kind: "completion", completion: { id: "", object: "chat.completion", created: 0, model, choices: [] } } as ChatOutcome;
      },
    };
    const bound: ChatStage = { name: "fusion-bound", run: (c, next) => ((c.serverTools ? (c.serverTools.maxTurns = Math.min(c.serverTools.maxTurns, maxToolCalls + 1)) : 0), next()) };
    await compose([deps.stages.serverTools, bound, deps.stages.plan, capture])(sub);
    return attempts;
  }

  return {
    async panelBound(call, opts) {
      let members = 0n;
      let answerTokens = 0;
      for (const [j, model] of opts.models.entries()) {
        let attempts: Attempt[];
        try {
          attempts = await planOf(call, model, opts.base, opts.maxToolCalls);
        } catch (err) {
          if (call.signal.aborted) throw err;
          continue; // fails the same way when it runs, as a member (or as the caller's 400)
        }
        let cost = 0n;
        let tokens = 0;
        for (const a of attempts) {
          const match = deps.catalog.resolve(a.requestedModel, a.provider, a.call.model);
          if (match) tokens = Math.max(tokens, outputTokenBound(a.call.body, match.endpoint));
          if (a.credentialSource === "byok") continue;
          if (!match) {
            const at = opts.fromExplicit ? `${opts.field}.analysis_models[${j}]` : `${opts.field}.preset`;
            throw invalidArgument(at, `${at}: ${a.requestedModel} on provider ${a.provider} has no price in the model catalog, and this key has a spend limit (or its workspace a budget): the fusion panel's cost cannot be bounded (docs/limits.md)`);
          }
          const c = maxCostOf(a.call.body, match.endpoint);
          if (c > cost) cost = c;
        }
        members += cost;
        answerTokens += tokens;
      }
      // The judge's prompt grows by the answers (each at most its output bound, one token per byte at least) and the
      // instructions around them (bytes, bounded generously).
      const extraPrompt = BigInt(answerTokens + 2048 + 256 * opts.models.length);
      let judge = 0n;
      for (const a of call.attempts) {
        if (a.credentialSource === "byok") continue;
        const match = deps.catalog.resolve(a.requestedModel, a.provider, a.call.model);
        if (match) {
          const c = extraPrompt * promptPriceOf(match.endpoint);
          if (c > judge) judge = c;
        }
      }
      return members + judge;
    },
    async panel(call, opts) {
      const settled = await Promise.allSettled(opts.models.map((model) => one(call, model, opts.base, opts.maxToolCalls)));
      const result: PanelResult = { members: [], answers: [], panelCost: 0n, lastError: undefined };
      for (const [i, r] of settled.entries()) {
        const model = opts.models[i]!;
        if (r.status === "rejected") {
          const refused = refusal(r.reason, opts, i);
          if (refused) throw refused;
          if (call.signal.aborted) throw call.signal.reason;
          result.lastError = r.reason;
          const err = r.reason instanceof ConnectError ? r.reason : undefined;
          result.members.push({ model, ok: false, error: { code: err ? statusOf(err) : 500, message: err ? err.rawMessage.slice(0, 300) : "the panel member failed" } });
          continue;
        }
        result.members.push(r.value.member);
        if (r.value.cost) result.panelCost += r.value.cost.total;
        if (r.value.text !== "") result.answers.push({ model, text: r.value.text });
      }
      return result;
    },
    async ask(call, model, base) {
      const { text, member } = await one(call, model, base, 1);
      return { text, member };
    },
  };
}

/** The request each panel member gets: the caller's, without what belongs to the outer request only. */
export function panelRequest(request: CanonicalRequest, tools: ReadonlyArray<Record<string, unknown>>): CanonicalRequest {
  const { plugins: _p, preset: _s, models: _m, stream: _st, stream_options: _so, tools: _t, tool_choice: _tc, debug: _d, ...rest } = request as Record<string, unknown>;
  return { ...rest, ...(tools.length > 0 ? { tools } : {}) } as CanonicalRequest;
}

/** The 502 when no member answered (the last member's own error when it was not a provider's failure). */
export function noAnswer(result: PanelResult): ConnectError {
  const { lastError, members } = result;
  if (lastError instanceof ConnectError && statusOf(lastError) !== 400) {
    return serviceError(Reason.UPSTREAM_FAILED, `No fusion panel member answered (${members.length} tried); the last: ${lastError.rawMessage}`, { retryable: true });
  }
  if (lastError instanceof ConnectError) return lastError;
  return serviceError(Reason.UPSTREAM_FAILED, `No fusion panel member gave a text answer (${members.length} tried)`, { retryable: true });
}

export function createFusionPlugin(deps: FusionDeps): Plugin {
  const runner = createFusionRunner(deps);

  const panelOf = (run: PluginRun) => {
    const preset = typeof run.options.preset === "string" ? run.options.preset : undefined;
    const named = FUSION_PANELS[preset ?? DEFAULT_PANEL]!;
    const explicit = strings(run.options.analysis_models);
    return {
      preset: preset ?? (explicit ? null : DEFAULT_PANEL),
      models: explicit ?? named.models,
      fromExplicit: explicit !== undefined,
      judge: typeof run.options.model === "string" ? run.options.model : preset ? named.judge : undefined,
    };
  };

  const toolsOf = (run: PluginRun): Array<Record<string, unknown>> => {
    if (Array.isArray(run.options.tools)) return run.options.tools as Array<Record<string, unknown>>;
    return [...(deps.searchConfigured ? [{ type: `${deps.brand}:web_search` }] : []), { type: `${deps.brand}:web_fetch` }];
  };

  return {
    id: "fusion",
    order: 25,
    prepare(call, run) {
      const { judge } = panelOf(run);
      if (judge === undefined) return;
      call.request = { ...call.request, model: judge };
      delete call.request.models;
    },
    async before(call, run) {
      const panel = panelOf(run);
      const maxToolCalls = typeof run.options.max_tool_calls === "number" ? run.options.max_tool_calls : DEFAULT_MAX_TOOL_CALLS;
      // The Limits table (docs/plugins.md); the ChatRequest definition checks them too, this holds for any path here.
      if (panel.models.length < 1 || panel.models.length > 8) throw invalidArgument(`${run.field}.analysis_models`, `${run.field}.analysis_models must list 1 to 8 models`);
      const tools = toolsOf(run);
      if (tools.length > 8) throw invalidArgument(`${run.field}.tools`, `${run.field}.tools lists at most 8 tools`);
      if (!(Number.isInteger(maxToolCalls) && maxToolCalls >= 1 && maxToolCalls <= 16)) {
        throw invalidArgument(`${run.field}.max_tool_calls`, `${run.field}.max_tool_calls must be an integer from 1 to 16`);
      }
      refuseNestedFusion(tools, `${run.field}.tools`, deps.brand);
      const opts: PanelOptions = { models: panel.models, base: panelRequest(call.request, tools), maxToolCalls, field: run.field, fromExplicit: panel.fromExplicit };
      // Under a spend limit the spend stage reserves the panel's largest cost with the judge's, before any panel call.
      const limits = call.caller.limits;
      if (limits && (limits.keySpend || limits.workspaceSpend)) call.reserveExtra = (call.reserveExtra ?? 0n) + (await runner.panelBound(call, opts));
      // The panel runs once the spend stage reserved (or found no limit): ChatCall.afterReserve.
      (call.afterReserve ??= []).push(() => runPanel(call, run, panel, tools, maxToolCalls, opts));
    },
  };

  async function runPanel(call: ChatCall, run: PluginRun, panel: ReturnType<typeof panelOf>, tools: Array<Record<string, unknown>>, maxToolCalls: number, opts: PanelOptions) {
    {
      const result = await runner.panel(call, opts);
      const { members, answers } = result;
      Object.assign(run.report as PluginReport, {
        preset: panel.preset,
        judge: typeof call.request.model === "string" ? call.request.model : null,
        tools: tools.map((t) => t.type),
        max_tool_calls: maxToolCalls,
        panel: members,
        succeeded: answers.length,
        failed: members.length - answers.length,
        panel_cost: usd(result.panelCost),
      });
      if (answers.length === 0) throw noAnswer(result);

      // The judge: the conversation, then the panel's answers and the instructions as the last user message.
      const judged = { role: "user", content: judgePrompt(answers) };
      const withJudge = (body: CanonicalRequest) =>
        ({ ...body, messages: [...(Array.isArray(body.messages) ? body.messages : []), judged] }) as CanonicalRequest;
      // Each attempt's own body (context-compression may have shortened it for its endpoint).
      const bodies = new Map<CanonicalRequest, CanonicalRequest>();
      for (const a of call.attempts) {
        let body = bodies.get(a.call.body);
        if (!body) bodies.set(a.call.body, (body = withJudge(a.call.body)));
        a.call = { ...a.call, body };
      }
      call.request = withJudge(call.request);
    }
  }
}

/** A fusion panel's tools cannot include the fusion server tool itself (no fusion inside fusion). */
export function refuseNestedFusion(tools: ReadonlyArray<Record<string, unknown>>, field: string, brand: string): void {
  tools.forEach((t, j) => {
    if (t.type === `${brand}:fusion`) throw invalidArgument(`${field}[${j}].type`, `${field}[${j}].type: a fusion panel cannot call the fusion server tool itself`);
  });
}

function contentOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("");
  return "";
}

/** The HTTP status of a chat error (its reason's, src/contract/reasons.ts). */
function statusOf(err: ConnectError): number {
  const wire = errorDetailOf(err)?.reason;
  const reason = wire ? reasonFromWire(wire, err.code) : undefined;
  return reason !== undefined ? ruleOf(reason).status : 500;
}
