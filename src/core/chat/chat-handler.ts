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
 * Responses name the provider that served them (`provider`). Provider keys never leave this module except
 * in the upstream request's own authentication header.
 */
import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { ServiceImpl, HandlerContext } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { ChatService } from "../../gen/portico/chat/v1/chat_service_pb.js";
import { Reason } from "../../contract/reasons.js";
import { ChatRequest, RuleViolation } from "../../contract/requests/index.js";
import { callerOf, type Caller } from "../auth.js";
import { invalidArgument, notFound, serviceError } from "../errors.js";
import type { PresetsRepository } from "../presets/presets-repository.js";
import type { CredentialStore } from "./credentials/load.js";
import { selectCredentials } from "./credentials/select.js";
import { applyPreset, presetReferenceOf, PresetReferenceError } from "./presets.js";
import type { ChatBody, ChatChunk, ProviderAdapter, UpstreamCall } from "./providers/index.js";
import { UpstreamError, type ProviderRegistry } from "./providers/index.js";
import { modelsOf, planAttempts, preferencesOf } from "./routing.js";

export interface ChatHandlerDeps {
  presets: PresetsRepository;
  credentials: CredentialStore;
  providers: ProviderRegistry;
  brand: string;
  logger: Logger;
}

interface Attempt {
  provider: string;
  requestedModel: string;
  adapter: ProviderAdapter;
  call: UpstreamCall;
}

export function createChatHandler(deps: ChatHandlerDeps): ServiceImpl<typeof ChatService> {
  const log = deps.logger.child({ component: "chat" });

  /** Steps 1–3: the request as sent upstream and the attempts, in order. */
  async function prepare(raw: JsonObject | undefined, caller: Caller, signal: AbortSignal): Promise<{ body: Record<string, unknown>; attempts: Attempt[] }> {
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
    }
    const models = modelsOf(body);
    if (models.length === 0) throw invalidArgument("model", "model is required (a model id such as openai/gpt-4o, or @preset/<slug>)");
    const planned = planAttempts(models, preferencesOf(body), (p) => deps.providers.get(p) !== undefined);
    const attempts: Attempt[] = [];
    for (const plan of planned) {
      const provider = deps.providers.get(plan.provider)!;
      const creds = await deps.credentials.forProvider(caller.workspaceId, plan.provider);
      const order = selectCredentials(creds, [], { provider: plan.provider, model: plan.requestedModel, keyHash: caller.keyHash, userId: caller.userId });
      for (const sel of order) {
        const cred = creds.find((c) => c.id === sel.id);
        if (!cred?.apiKey) continue;
        attempts.push({
          provider: plan.provider,
          requestedModel: plan.requestedModel,
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
      const { attempts } = await prepare(req.body, caller, ctx.signal);
      let last: unknown;
      for (const a of attempts) {
        try {
          const completion = await a.adapter.complete(a.call);
          return { completion: { ...completion, provider: a.provider } as unknown as JsonObject };
        } catch (err) {
          if (!(err instanceof UpstreamError)) throw err;
          last = err;
          log.info({ provider: a.provider, model: a.requestedModel, status: err.status }, "upstream attempt failed");
          if (!err.retryable) break;
        }
      }
      throw exhausted(last);
    },

    async *streamChatCompletion(req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const { body, attempts } = await prepare(req.body, caller, ctx.signal);
      const echo = isEcho(body);
      let last: unknown;
      for (const a of attempts) {
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
        const meta = { id: first.done ? `gen-${randomUUID()}` : first.value.id, created: Math.floor(Date.now() / 1000), model: a.requestedModel };
        if (echo) {
          yield { chunk: { ...meta, object: "chat.completion.chunk", provider: a.provider, choices: [], debug: { echo_upstream_body: a.adapter.upstreamBody(a.call) } } as unknown as JsonObject };
        }
        if (first.done) return;
        yield { chunk: { ...first.value, provider: a.provider } as unknown as JsonObject };
        try {
          for (;;) {
            const next = await iterator.next();
            if (next.done) return;
            yield { chunk: { ...next.value, provider: a.provider } as unknown as JsonObject };
          }
        } catch (err) {
          if (ctx.signal.aborted) throw err;
          const status = err instanceof UpstreamError && err.status > 0 ? err.status : 502;
          const message = err instanceof UpstreamError ? err.message : "The provider's stream broke";
          log.info({ provider: a.provider, model: a.requestedModel, status }, "upstream stream failed after its first chunk");
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
    },
  };
}

function isEcho(body: Readonly<Record<string, unknown>>): boolean {
  const debug = body.debug;
  return typeof debug === "object" && debug !== null && (debug as Record<string, unknown>).echo_upstream_body === true;
}
