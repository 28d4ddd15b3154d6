/**
 * ChatService: chat completions routed to upstream providers (issue 11). For one request:
 *
 * 1. validate the body with the ChatRequest definition (the same rules as preset creation);
 * 2. apply the preset it names, if any (src/core/chat/presets.ts);
 * 3. plan (provider, model) attempts from `model`, `models` and `provider` (routing.ts), and for each the
 *    credentials the BYOK flags allow, in order (credentials/select.ts);
 * 4. call the provider adapter; an upstream error before the first byte (401/403/408/429/5xx, connect
 *    error) moves on to the next (provider, model, credential); after the first chunk it ends the stream
 *    with a `finish_reason: "error"` chunk carrying the error.
 *
 * Responses name the provider that served them (`provider`); their `id` is the generation id, under which
 * the request is recorded (generations.ts; `GET /api/v1/generation?id=`). Provider keys never leave this module except
 * in the upstream request's own authentication header.
 */
import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { ConnectError, type ServiceImpl, type HandlerContext } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { ChatService } from "../../gen/portico/chat/v1/chat_service_pb.js";
import { ALL_REASONS, Reason, ruleOf } from "../../contract/reasons.js";
import { errorDetailOf } from "../../lib/service-error.js";
import type { GenerationRecorder } from "./seams.js";
import { ChatRequest, RuleViolation } from "../../contract/requests/index.js";
import { callerOf, type Caller } from "../auth.js";
import { invalidArgument, notFound, serviceError } from "../errors.js";
import type { PresetsRepository } from "../presets/presets-repository.js";
import type { CredentialStore } from "./credentials/load.js";
import type { SharedCredentialStore } from "../byok/provider-keys.js";
import { selectCredentials } from "./credentials/select.js";
import { applyPreset, presetReferenceOf, PresetReferenceError } from "./presets.js";
import type { ChatBody, ChatChunk, ChatUsage, ProviderAdapter, UpstreamCall } from "./providers/index.js";
import { UpstreamError, type ProviderRegistry } from "./providers/index.js";
import { modelsOf, planAttempts, preferencesOf } from "./routing.js";

export interface ChatHandlerDeps {
  presets: PresetsRepository;
  generations: GenerationRecorder;
  credentials: CredentialStore;
  /** The operator's shared provider keys (`portico admin provider-key`); none when absent. */
  shared?: SharedCredentialStore;
  providers: ProviderRegistry;
  brand: string;
  logger: Logger;
}

interface Attempt {
  provider: string;
  requestedModel: string;
  credentialId: string;
  credentialSource: "byok" | "shared";
  adapter: ProviderAdapter;
  call: UpstreamCall;
}

export function createChatHandler(deps: ChatHandlerDeps): ServiceImpl<typeof ChatService> {
  const log = deps.logger.child({ component: "chat" });

  /** Steps 1–3: the request as sent upstream and the attempts, in order. */
  async function prepare(
    raw: JsonObject | undefined,
    caller: Caller,
    signal: AbortSignal,
    track: Tracking,
  ): Promise<{ body: Record<string, unknown>; attempts: Attempt[] }> {
    let body: Record<string, unknown> = (raw ?? {}) as Record<string, unknown>;
    try {
      ChatRequest.parse(body, { brand: deps.brand });
    } catch (err) {
      if (err instanceof RuleViolation) throw invalidArgument(err.field, err.message);
      throw err;
    }
    let ref;
    try {
      ref = presetReferenceOf(body);
    } catch (err) {
      if (err instanceof PresetReferenceError) throw invalidArgument(err.field, err.message);
      throw err;
    }
    if (ref) {
      const preset = await deps.presets.findPreset(caller.workspaceId, ref.slug);
      if (!preset) throw notFound(`No preset "${ref.slug}" in this workspace`);
      const version = ref.version !== undefined
        ? await deps.presets.findVersion(preset.id, ref.version)
        : preset.designatedVersionId ? await deps.presets.findVersionById(preset.designatedVersionId) : null;
      if (!version) throw notFound(ref.version !== undefined ? `Preset "${ref.slug}" has no version ${ref.version}` : `Preset "${ref.slug}" has no designated version`);
      body = applyPreset(body, { config: (version.config ?? {}) as Record<string, unknown>, systemPrompt: version.systemPrompt });
      track.presetSlug = ref.slug;
      track.presetVersion = version.version;
    }
    const models = modelsOf(body);
    track.requestedModel = models[0] ?? "";
    if (models.length === 0) throw invalidArgument("model", "model is required (a model id such as openai/gpt-4o, or @preset/<slug>)");
    const planned = planAttempts(models, preferencesOf(body), (p) => deps.providers.get(p) !== undefined);
    const attempts: Attempt[] = [];
    for (const plan of planned) {
      const provider = deps.providers.get(plan.provider)!;
      const [creds, shared] = await Promise.all([
        deps.credentials.forProvider(caller.workspaceId, plan.provider),
        deps.shared ? deps.shared.forProvider(plan.provider) : [],
      ]);
      const order = selectCredentials(creds, shared, { provider: plan.provider, model: plan.requestedModel, keyHash: caller.keyHash, userId: caller.userId });
      for (const sel of order) {
        const cred = sel.source === "shared" ? shared.find((c) => c.id === sel.id) : creds.find((c) => c.id === sel.id);
        if (!cred?.apiKey) continue;
        attempts.push({
          provider: plan.provider,
          requestedModel: plan.requestedModel,
          credentialId: cred.id,
          credentialSource: sel.source,
          adapter: provider.adapter,
          call: { model: plan.upstreamModel, body: body as ChatBody, baseUrl: provider.baseUrl, apiKey: cred.apiKey, signal },
        });
      }
    }
    if (attempts.length === 0) {
      throw serviceError(Reason.NO_CREDENTIAL, `No provider credential may serve ${models.join(", ")}: store one with POST /api/v1/byok, or check its flags`);
    }
    return { body, attempts };
  }

  const exhausted = (last: unknown) =>
    serviceError(Reason.UPSTREAM_FAILED, `Every provider attempt failed; the last: ${last instanceof UpstreamError ? last.message : "provider unreachable"}`, {
      retryable: last instanceof UpstreamError ? last.retryable : true,
    });

  return {
    async createChatCompletion(req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const track = tracking(false);
      try {
        const { attempts } = await prepare(req.body, caller, ctx.signal, track);
        let last: unknown;
        for (const a of attempts) {
          track.attempts++;
          try {
            const completion = await a.adapter.complete(a.call);
            served(track, a);
            track.usage = completion.usage ?? null;
            track.finishReason = completion.choices[0]?.finish_reason ?? null;
            track.status = "success";
            return { completion: { ...completion, id: track.id, provider: a.provider } as unknown as JsonObject };
          } catch (err) {
            if (!(err instanceof UpstreamError)) throw err;
            last = err;
            log.info({ provider: a.provider, model: a.requestedModel, status: err.status }, "upstream attempt failed");
            if (!err.retryable) break;
          }
        }
        throw exhausted(last);
      } catch (err) {
        failed(track, err, ctx.signal);
        throw err;
      } finally {
        record(track, caller);
      }
    },

    async listModels(_req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const [creds, presets, shared] = await Promise.all([
        deps.credentials.listAll(caller.workspaceId),
        deps.presets.listPresets(caller.workspaceId, { offset: 0, limit: 100 }),
        deps.shared ? deps.shared.providers() : [],
      ]);
      const ids = new Map<string, { ownedBy: string; created: bigint }>();
      const secs = (d: Date) => BigInt(Math.floor(d.getTime() / 1000));
      for (const c of creds) {
        if (c.disabled || !deps.providers.get(c.provider)) continue;
        if (c.allowedApiKeyHashes && !c.allowedApiKeyHashes.includes(caller.keyHash)) continue;
        if (c.allowedUserIds && !c.allowedUserIds.includes(caller.userId)) continue;
        for (const m of c.allowedModels ?? [`${c.provider}/*`]) if (!ids.has(m)) ids.set(m, { ownedBy: c.provider, created: secs(c.createdAt) });
      }
      // The operator's shared keys serve every model of their provider, unless a credential the caller is
      // governed by removes them for the whole provider (is_required).
      for (const s of shared) {
        if (!deps.providers.get(s.provider) || ids.has(`${s.provider}/*`)) continue;
        const required = creds.some(
          (c) =>
            c.provider === s.provider && !c.disabled && c.isRequired &&
            (!c.allowedApiKeyHashes || c.allowedApiKeyHashes.includes(caller.keyHash)) &&
            (!c.allowedUserIds || c.allowedUserIds.includes(caller.userId)),
        );
        if (!required) ids.set(`${s.provider}/*`, { ownedBy: s.provider, created: secs(s.createdAt) });
      }
      return {
        models: [
          ...presets.items.map((p) => ({ id: `@preset/${p.slug}`, ownedBy: "preset", created: secs(p.createdAt) })),
          ...[...ids].sort(([a], [b]) => (a < b ? -1 : 1)).map(([id, m]) => ({ id, ...m })),
        ],
      };
    },

    async *streamChatCompletion(req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const track = tracking(true);
      try {
        yield* streamAttempts(req.body, caller, ctx, track);
        if (track.status === "pending") track.status = ctx.signal.aborted ? "cancelled" : "success";
      } catch (err) {
        failed(track, err, ctx.signal);
        throw err;
      } finally {
        if (track.status === "pending") track.status = "cancelled"; // the consumer stopped reading
        record(track, caller);
      }
    },
  };

  async function* streamAttempts(raw: JsonObject | undefined, caller: Caller, ctx: HandlerContext, track: Tracking) {
      const { body, attempts } = await prepare(raw, caller, ctx.signal, track);
      const echo = isEcho(body);
      let last: unknown;
      for (const a of attempts) {
        track.attempts++;
        const iterator = a.adapter.stream(a.call)[Symbol.asyncIterator]();
        let first: IteratorResult<ChatChunk>;
        try {
          first = await iterator.next();
        } catch (err) {
          if (!(err instanceof UpstreamError)) throw err;
          last = err;
          log.info({ provider: a.provider, model: a.requestedModel, status: err.status }, "upstream attempt failed");
          if (!err.retryable) break;
          continue;
        }
        served(track, a);
        track.timeToFirstTokenMs = performance.now() - track.start;
        const meta = { id: track.id, created: Math.floor(Date.now() / 1000), model: a.requestedModel };
        if (echo) {
          yield { chunk: { ...meta, object: "chat.completion.chunk", provider: a.provider, choices: [], debug: { echo_upstream_body: a.adapter.upstreamBody(a.call) } } as unknown as JsonObject };
        }
        if (first.done) return;
        observe(track, first.value);
        yield { chunk: { ...first.value, id: track.id, provider: a.provider } as unknown as JsonObject };
        try {
          for (;;) {
            const next = await iterator.next();
            if (next.done) return;
            observe(track, next.value);
            yield { chunk: { ...next.value, id: track.id, provider: a.provider } as unknown as JsonObject };
          }
        } catch (err) {
          if (ctx.signal.aborted) throw err;
          const status = err instanceof UpstreamError && err.status > 0 ? err.status : 502;
          const message = err instanceof UpstreamError ? err.message : "The provider's stream broke";
          log.info({ provider: a.provider, model: a.requestedModel, status }, "upstream stream failed after its first chunk");
          track.status = "error";
          track.errorCode = status;
          track.finishReason = "error";
          yield {
            chunk: {
              ...meta,
              object: "chat.completion.chunk",
              provider: a.provider,
              choices: [{ index: 0, delta: {}, finish_reason: "error", native_finish_reason: null }],
              error: { code: status, message },
            } as unknown as JsonObject,
          };
          return;
        } finally {
          await iterator.return?.();
        }
      }
      throw exhausted(last);
  }

  function record(track: Tracking, caller: Caller): void {
    deps.generations.record({
      id: track.id,
      organizationId: caller.organizationId,
      workspaceId: caller.workspaceId,
      keyHash: caller.keyHash,
      requestedModel: track.requestedModel,
      model: track.model,
      provider: track.provider,
      credentialId: track.credentialId,
      credentialSource: track.credentialSource,
      presetSlug: track.presetSlug,
      presetVersion: track.presetVersion,
      streamed: track.streamed,
      promptTokens: track.usage?.prompt_tokens ?? null,
      completionTokens: track.usage?.completion_tokens ?? null,
      totalTokens: track.usage?.total_tokens ?? null,
      latencyMs: performance.now() - track.start,
      timeToFirstTokenMs: track.timeToFirstTokenMs,
      status: track.status === "pending" ? "error" : track.status,
      finishReason: track.finishReason,
      errorCode: track.errorCode,
      attempts: track.attempts,
      createdAt: new Date(track.startedAt),
    });
  }
}

interface Tracking {
  id: string;
  start: number;
  startedAt: number;
  streamed: boolean;
  requestedModel: string;
  model: string | null;
  provider: string | null;
  credentialId: string | null;
  credentialSource: "byok" | "shared" | null;
  presetSlug: string | null;
  presetVersion: number | null;
  attempts: number;
  usage: ChatUsage | null;
  finishReason: string | null;
  timeToFirstTokenMs: number | null;
  status: "pending" | "success" | "error" | "cancelled";
  errorCode: number | null;
}

function tracking(streamed: boolean): Tracking {
  return {
    id: `gen-${randomUUID()}`,
    start: performance.now(),
    startedAt: Date.now(),
    streamed,
    requestedModel: "",
    model: null,
    provider: null,
    credentialId: null,
    credentialSource: null,
    presetSlug: null,
    presetVersion: null,
    attempts: 0,
    usage: null,
    finishReason: null,
    timeToFirstTokenMs: null,
    status: "pending",
    errorCode: null,
  };
}

function served(track: Tracking, a: Attempt): void {
  track.provider = a.provider;
  track.model = a.requestedModel;
  track.credentialId = a.credentialId;
  track.credentialSource = a.credentialSource;
}

function observe(track: Tracking, chunk: ChatChunk): void {
  if (chunk.usage) track.usage = chunk.usage;
  const finish = chunk.choices[0]?.finish_reason;
  if (finish) track.finishReason = finish;
}

function failed(track: Tracking, err: unknown, signal: AbortSignal): void {
  if (signal.aborted) {
    track.status = "cancelled";
    return;
  }
  track.status = "error";
  const detail = err instanceof ConnectError ? errorDetailOf(err) : undefined;
  const reason = detail ? ALL_REASONS.find((r) => ruleOf(r).wire === detail.reason) : undefined;
  track.errorCode = reason !== undefined ? ruleOf(reason).status : 500;
}

function isEcho(body: Readonly<Record<string, unknown>>): boolean {
  const debug = body.debug;
  return typeof debug === "object" && debug !== null && (debug as Record<string, unknown>).echo_upstream_body === true;
}
