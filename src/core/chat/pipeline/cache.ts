/**
 * Stage "cache": the exact-match response cache (docs/operations.md, "Response cache"), off by default. It sits
 * after `preset` (the request is the merged one: a preset's `cache` switches it on) and before `plan`, so a hit
 * plans nothing, reserves no spend and calls no provider.
 *
 * - On when the request (or its preset) has `cache: {ttl_seconds}` with 1 ≤ ttl_seconds ≤ 86400; 0 is off (how a
 *   request opts out of its preset's or workspace's cache); without `cache`, the workspace's
 *   `response_cache_ttl_seconds` (management API). `cache` itself never goes upstream.
 * - The key: SHA-256 of the canonical JSON (safe-stable-stringify: keys sorted) of the organization, the workspace,
 *   the model and every request field except those that cannot change the answer (KEY_EXCLUDED_FIELDS). So the
 *   cache never crosses organizations or workspaces.
 * - What is stored: the canonical answer (`chat.completion` with the provider's raw usage, before the cost stage),
 *   never a dialect's bytes, so a non-streamed and a streamed request (and either dialect) share an entry. Only a
 *   successful complete answer with one choice, finish reason `stop` or `length` and no tool calls is stored:
 *   not errors, not cancelled or broken streams, not tool-call turns (their ids and side effects belong to one
 *   conversation). The store is awaited before the answer ends (before a stream's last event reaches the
 *   caller), so an answer the caller has whole is already stored; a store that fails only logs.
 * - A hit: the stored answer under this request's generation id; a stream is synthesized from it (role chunk,
 *   reasoning and content, finish chunk, usage chunk; the gateway adds `[DONE]`). `track.cache` is "hit" (the
 *   `x-portico-cache` header, the generation's `cache_hit`), attempts 0, and the cost stage prices it at 0.
 */
import { createHash } from "node:crypto";
import { stringify } from "safe-stable-stringify";
import type { Logger } from "pino";
import type { CanonicalResponse, ReasoningDetail, StreamEvent, Usage } from "../model.js";
import type { ResponseCacheStore } from "../response-cache.js";
import type { Catalog } from "../../catalog/catalog.js";
import type { ChatCall, ChatOutcome, ChatStage } from "./stage.js";

/** Request fields that do not change the answer, left out of the key. */
export const KEY_EXCLUDED_FIELDS: ReadonlySet<string> = new Set([
  "user",
  "trace",
  "metadata",
  "session_id",
  "stream",
  "stream_options",
  "cache",
  "debug",
  "preset",
]);

/** What the cache keeps of an answer. */
interface CachedAnswer {
  v: 1;
  /** The canonical answer (usage as the provider reported it; `id` is replaced on every hit). */
  completion: CanonicalResponse;
  provider: string | null;
  /** The model as planned (`<provider>/<model>`) and the catalog model that served it. */
  model: string | null;
  catalogModel: string | null;
}

/** The cache's time to live for the request in ms; undefined when the cache is off for it. */
export function cacheTtlMs(request: Readonly<Record<string, unknown>>): number | undefined {
  const cache = request.cache;
  if (typeof cache !== "object" || cache === null) return undefined;
  const ttl = (cache as { ttl_seconds?: unknown }).ttl_seconds;
  return typeof ttl === "number" && Number.isInteger(ttl) && ttl > 0 ? ttl * 1000 : undefined;
}

/** The cache key of `request` for the caller: SHA-256 hex of the canonical JSON of what changes the answer. */
export function cacheKeyOf(caller: { organizationId: string; workspaceId: string }, request: Readonly<Record<string, unknown>>): string {
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(request)) if (!KEY_EXCLUDED_FIELDS.has(k) && v !== undefined) body[k] = v;
  const canonical = stringify({ v: 1, organization: caller.organizationId, workspace: caller.workspaceId, model: request.model ?? null, body });
  return createHash("sha256").update(canonical ?? "").digest("hex");
}

const isEcho = (request: Readonly<Record<string, unknown>>) =>
  typeof request.debug === "object" && request.debug !== null && (request.debug as { echo_upstream_body?: unknown }).echo_upstream_body === true;

/** Whether an answer may be stored: one choice, ended by `stop` or `length`, no tool calls. */
function storable(c: CanonicalResponse): boolean {
  if (c.choices.length !== 1) return false;
  const choice = c.choices[0]!;
  return (choice.finish_reason === "stop" || choice.finish_reason === "length") && !(choice.message.tool_calls && choice.message.tool_calls.length > 0);
}

export function createCacheStage(deps: { store: ResponseCacheStore | undefined; catalog: Catalog; logger: Logger }): ChatStage {
  const log = deps.logger;

  /** The catalog model that served the call (as the cost stage finds it), kept with the answer for the hits' records. */
  function catalogModelOf(call: ChatCall): string | null {
    const { track } = call;
    const served = call.attempts.find((a) => a.provider === track.provider && a.credentialId === track.credentialId && a.requestedModel === track.model);
    const match = served && track.model !== null ? deps.catalog.resolve(track.model, served.provider, served.call.model) : undefined;
    return match?.model.slug ?? null;
  }

  async function lookup(key: string): Promise<CachedAnswer | undefined> {
    try {
      const raw = await deps.store!.get(key);
      if (raw === null) return undefined;
      const parsed = JSON.parse(raw) as CachedAnswer;
      return parsed?.v === 1 && parsed.completion && Array.isArray(parsed.completion.choices) ? parsed : undefined;
    } catch (err) {
      log.warn({ err, store: deps.store!.kind }, "response cache: a read failed (served as a miss)");
      return undefined;
    }
  }

  async function keep(call: ChatCall, key: string, ttlMs: number, completion: CanonicalResponse): Promise<void> {
    if (!storable(completion)) return;
    const { id: _id, ...rest } = completion;
    const entry: CachedAnswer = {
      v: 1,
      completion: { ...rest, id: "" },
      provider: call.track.provider,
      model: call.track.model,
      catalogModel: catalogModelOf(call),
    };
    try {
      await deps.store!.set(key, JSON.stringify(entry), ttlMs, { organizationId: call.caller.organizationId, workspaceId: call.caller.workspaceId });
    } catch (err) {
      log.warn({ err, store: deps.store!.kind }, "response cache: a write failed (the answer was not stored)");
    }
  }

  /** The stream's events passed on; once it ended whole, its answer is stored before the stream ends. */
  async function* storeAfter(call: ChatCall, key: string, ttlMs: number, events: AsyncIterable<StreamEvent>): AsyncGenerator<StreamEvent> {
    const acc = accumulator();
    for await (const event of events) {
      acc.add(event);
      yield event;
    }
    const completion = acc.completion();
    if (completion && !call.signal.aborted) await keep(call, key, ttlMs, completion);
  }

  function hit(call: ChatCall, entry: CachedAnswer): ChatOutcome {
    const { track } = call;
    const completion: CanonicalResponse = { ...entry.completion, id: track.id, created: Math.floor(Date.now() / 1000), ...(entry.provider ? { provider: entry.provider } : {}) };
    track.cache = "hit";
    track.provider = entry.provider;
    track.model = entry.model;
    track.catalogModel = entry.catalogModel;
    track.usage = completion.usage ?? null;
    track.finishReason = completion.choices[0]?.finish_reason ?? null;
    track.status = "success";
    if (!call.streamed) return { kind: "completion", completion };
    track.timeToFirstTokenMs = performance.now() - track.start;
    return { kind: "stream", events: replay(completion) };
  }

  return {
    name: "cache",
    run(call, next) {
      // No `cache` in the request and none for the workspace: nothing to do (no async step of its own).
      if (call.request.cache === undefined && !call.caller.responseCacheTtlSeconds) return next();
      return cached(call, next);
    },
  };

  async function cached(call: ChatCall, next: () => Promise<ChatOutcome>): Promise<ChatOutcome> {
    // The request's (or its preset's) `cache` wins whole; without it, the workspace's setting.
    const ws = call.caller.responseCacheTtlSeconds;
    const ttlMs = call.request.cache !== undefined && call.request.cache !== null ? cacheTtlMs(call.request) : ws ? ws * 1000 : undefined;
    if (call.request.cache !== undefined) {
      // Portico's own field: never sent upstream.
      const { cache: _cache, ...rest } = call.request;
      call.request = rest as typeof call.request;
    }
    // A request with server tools is not cached: their results depend on the time and the web (docs/plugins.md).
    if (ttlMs === undefined || !deps.store || isEcho(call.request) || call.serverTools) return next();
    if (typeof call.request.model === "string" && call.track.requestedModel === "") call.track.requestedModel = call.request.model;
    const key = cacheKeyOf(call.caller, call.request);
    const entry = await lookup(key);
    if (entry) return hit(call, entry);
    call.track.cache = "miss";
    const outcome = await next();
    if (outcome.kind === "stream") return { kind: "stream", events: storeAfter(call, key, ttlMs, outcome.events) };
    await keep(call, key, ttlMs, outcome.completion);
    return outcome;
  }
}

/** A stored answer as a stream: role chunk, reasoning and content, finish chunk, usage chunk. */
async function* replay(c: CanonicalResponse): AsyncGenerator<StreamEvent> {
  const choice = c.choices[0]!;
  const base = { id: c.id, object: "chat.completion.chunk" as const, created: c.created, model: c.model, ...(c.provider ? { provider: c.provider } : {}) };
  const msg = choice.message;
  yield { ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] };
  if (msg.reasoning || (msg.reasoning_details && msg.reasoning_details.length > 0)) {
    const delta: StreamEvent["choices"][number]["delta"] = {};
    if (msg.reasoning) delta.reasoning = msg.reasoning;
    if (msg.reasoning_details && msg.reasoning_details.length > 0) delta.reasoning_details = msg.reasoning_details;
    yield { ...base, choices: [{ index: 0, delta, finish_reason: null }] };
  }
  if (msg.content) yield { ...base, choices: [{ index: 0, delta: { content: msg.content }, finish_reason: null }] };
  yield { ...base, choices: [{ index: 0, delta: {}, finish_reason: choice.finish_reason, native_finish_reason: choice.native_finish_reason ?? null }] };
  if (c.usage) yield { ...base, choices: [], usage: c.usage };
}

/** Builds the complete answer out of a stream's events; none when the stream did not end as a storable answer. */
function accumulator() {
  let content = "";
  let reasoning = "";
  const details = new Map<number, ReasoningDetail>();
  let finish: CanonicalResponse["choices"][number]["finish_reason"] = null;
  let nativeFinish: string | null | undefined;
  let usage: Usage | undefined;
  let first: StreamEvent | undefined;
  let spoilt = false;
  return {
    add(e: StreamEvent) {
      first ??= e;
      if (e.error || e.debug) spoilt = true;
      if (e.usage) usage = e.usage;
      if (e.choices.length > 1) spoilt = true;
      const choice = e.choices[0];
      if (!choice) return;
      const d = choice.delta ?? {};
      if (d.tool_calls && d.tool_calls.length > 0) spoilt = true;
      // What the reassembly does not rebuild (log probabilities, a refusal) is not stored from a stream.
      const extra = choice as { logprobs?: unknown };
      if ((extra.logprobs !== undefined && extra.logprobs !== null) || (typeof (d as { refusal?: unknown }).refusal === "string" && (d as { refusal: string }).refusal !== "")) spoilt = true;
      if (typeof d.content === "string") content += d.content;
      if (typeof d.reasoning === "string") reasoning += d.reasoning;
      for (const rd of d.reasoning_details ?? []) {
        const i = rd.index ?? details.size;
        const had = details.get(i);
        if (!had || had.type !== rd.type) details.set(i, { ...rd });
        else if (rd.type === "reasoning.text" && had.type === "reasoning.text") {
          details.set(i, { ...had, ...rd, text: (had.text ?? "") + (rd.text ?? "") });
        } else details.set(i, { ...had, ...rd });
      }
      if (choice.finish_reason) {
        finish = choice.finish_reason;
        nativeFinish = choice.native_finish_reason;
      }
    },
    completion(): CanonicalResponse | undefined {
      if (spoilt || !first || finish === null) return undefined;
      const message: CanonicalResponse["choices"][number]["message"] = { role: "assistant", content };
      if (reasoning) message.reasoning = reasoning;
      if (details.size > 0) message.reasoning_details = [...details.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v);
      return {
        id: first.id,
        object: "chat.completion",
        created: first.created,
        model: first.model,
        choices: [{ index: 0, message, finish_reason: finish, ...(nativeFinish !== undefined ? { native_finish_reason: nativeFinish } : {}) }],
        ...(usage ? { usage } : {}),
      };
    },
  };
}
