/**
 * The Gemini dialect's RPCs of ChatService (GenerateContent, StreamGenerateContent, CountGeminiTokens): the same
 * pipeline as chat completions (`createChatStages`, chat-handler.ts) with the dialect's stages in its slots
 * (`geminiEdges`; dialects/gemini-generate.ts): decode (Gemini → canonical) after the outer stages, and the
 * server-tools refusal.
 *
 * The decode stage sits after record so a refused body is still recorded, like a refused chat request. The model
 * comes from the path: `<provider>/<model>` or `@preset/<slug>` as everywhere, a `models/` prefix dropped, and a
 * bare Gemini id (`gemini-2.5-flash`, what gemini-cli sends) is Google's model: the catalog's `google/<id>` (or
 * the catalog model whose Google AI Studio endpoint has that id or alias), else `google-ai-studio/<id>`,
 * relayed uncatalogued to Google AI Studio (docs/dialects.md). Counting runs validate → preset → route → plan and asks
 * the first planned endpoint that offers counting, else estimates, as CountMessageTokens does.
 */
import type { HandlerContext } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { callerOf } from "../auth.js";
import { GeminiCountTokensRequest, GenerateContentRequest } from "../../contract/requests/gemini-request.js";
import { fail } from "../../contract/requests/kit.js";
import { checkRules } from "../errors.js";
import { newCall, type ChatCall, type ChatStage } from "./pipeline/stage.js";
import { chatChain, type DialectEdges } from "./pipeline/chain.js";
import { createServerToolsRefusalStage } from "./pipeline/server-tools.js";
import type { ChatStages } from "./chat-handler.js";
import { untilOutcome } from "./pipeline/keepalive.js";
import { countInputTokens } from "./pipeline/count-tokens.js";
import { sessionHeaderOf } from "./pipeline/context.js";
import { bodyOf } from "./request-body.js";
import { decodeRequest, echoOf, encodeResponse, GeminiStreamEncoder, type GeminiEcho } from "./dialects/gemini-generate.js";
import type { Catalog } from "../catalog/catalog.js";
import type { CanonicalRequest } from "./model.js";
import { PackedItems, packedMessages, sizeOfText } from "./pack.js";

export interface GeminiDeps {
  stages: ChatStages;
  brand: string;
  catalog: Catalog;
  logger: Logger;
  keepaliveMs: number;
  budgetOf(ctx: HandlerContext): number | undefined;
  withUpstreamTime(err: unknown, upstreamMs: number): unknown;
}

/** The provider slug of Google AI Studio (the Gemini API), which serves bare Gemini model ids. */
const GOOGLE_AI_STUDIO = "google-ai-studio";

/** The Portico model id a path's model names (see the module comment). */
export function modelOfPath(raw: string, catalog: Catalog): string {
  const model = raw.replace(/^models\//, "");
  if (model === "") fail("model", "must name a model: <provider>/<model>, @preset/<slug> or a Gemini model id");
  if (model.includes("/") || model.startsWith("@")) return model;
  if (catalog.model(`google/${model}`)) return `google/${model}`;
  const match = catalog.endpointFor(GOOGLE_AI_STUDIO, model);
  if (match) return match.model.slug;
  return `${GOOGLE_AI_STUDIO}/${model}`;
}

/** Replaces the raw body with the canonical request (400 naming the Gemini field when invalid); keeps the body. */
function decodeStage(model: string, keep: { body?: GenerateContentRequest }): ChatStage {
  return {
    name: "decode",
    run(call, next) {
      const body = checkRules(() => GenerateContentRequest.parse(call.request));
      keep.body = body;
      if (body.model !== undefined && body.model.replace(/^models\//, "") !== model.replace(/^models\//, "")) {
        checkRules(() => fail("model", `must name the model of the path ("${model}") or be left out`));
      }
      call.request = checkRules(() => decodeRequest(body, model));
      if (call.streamed) call.request.stream = true;
      return next();
    },
  };
}

type Req = { body?: JsonObject; bodyJson?: string; model: string };

/** The Gemini dialect's stages in the chain's slots (pipeline/chain.ts), for a request's model (the path's) and its `keep`. */
export function geminiEdges(brand: string): (model: string, keep: { body?: GenerateContentRequest }) => DialectEdges {
  const serverTools = createServerToolsRefusalStage({ brand, route: "the Gemini dialect (POST /api/v1beta/models/…)" });
  return (model, keep) => ({ decode: decodeStage(model, keep), serverTools });
}

export function createGeminiMethods(deps: GeminiDeps) {
  const { stages } = deps;
  const edges = geminiEdges(deps.brand);
  const resolve = (req: Req) => checkRules(() => modelOfPath(req.model, deps.catalog));
  const run = (call: ChatCall, req: Req, keep: { body?: GenerateContentRequest }) =>
    chatChain(stages.chain, edges(resolve(req), keep))(call).catch((err: unknown) => Promise.reject(deps.withUpstreamTime(err, call.track.upstreamMs)));
  const raw = (body: JsonObject | undefined) => (body ?? {}) as unknown as CanonicalRequest;
  const fresh = (ctx: HandlerContext, streamed: boolean, req: Req): ChatCall => {
    const call = newCall(callerOf(ctx), ctx.signal, streamed, raw(bodyOf(req)), deps.budgetOf(ctx), sessionHeaderOf(ctx));
    call.track.dialect = "gemini";
    return call;
  };

  return {
    async generateContent(req: Req, ctx: HandlerContext) {
      const call = fresh(ctx, false, req);
      const keep: { body?: GenerateContentRequest } = {};
      const outcome = await run(call, req, keep);
      if (outcome.kind !== "completion") throw new Error("the chat pipeline answered a non-streaming request with a stream");
      return { responseJson: JSON.stringify(encodeResponse(outcome.completion, echoOf(keep.body))), upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
    },

    async *streamGenerateContent(req: Req, ctx: HandlerContext) {
      const call = fresh(ctx, true, req);
      const keep: { body?: GenerateContentRequest } = {};
      const pending = run(call, req, keep);
      const outcome = yield* untilOutcome(pending, deps.keepaliveMs, { chunksJson: [] });
      if (outcome.kind !== "stream") throw new Error("the chat pipeline answered a streaming request with a completion");
      const echo: GeminiEcho = echoOf(keep.body);
      const encoder = new GeminiStreamEncoder(String(call.request.model ?? ""), echo);
      const timing = { upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
      // The chunks of the canonical events at hand in one message (pack.ts); the closing ones after the last.
      const text = (chunks: unknown[]) => chunks.map((c) => JSON.stringify(c));
      const packed = new PackedItems(outcome.events[Symbol.asyncIterator](), (event) => text(encoder.push(event)), sizeOfText, () => text(encoder.end()));
      yield* packedMessages(packed, timing, (chunksJson) => ({ chunksJson }));
    },

    async countGeminiTokens(req: Req, ctx: HandlerContext) {
      const body = checkRules(() => GeminiCountTokensRequest.parse(bodyOf(req) ?? {}));
      const model = resolve(req);
      const { contents, generateContentRequest, ...routing } = body;
      const prompt = generateContentRequest ?? { contents: contents! };
      if (generateContentRequest?.model !== undefined && generateContentRequest.model.replace(/^models\//, "") !== req.model.replace(/^models\//, "")) {
        checkRules(() => fail("generateContentRequest.model", `must name the model of the path ("${req.model}") or be left out`));
      }
      const request = checkRules(() => decodeRequest({ ...prompt, ...routing } as GenerateContentRequest, model));
      const call = newCall(callerOf(ctx), ctx.signal, false, request, deps.budgetOf(ctx));
      const counted = await countInputTokens(call, stages.count, deps.logger);
      return { totalTokens: counted.tokens, exact: counted.exact, provider: counted.provider };
    },
  };
}
