/**
 * The Anthropic Messages dialect's RPCs of ChatService (CreateMessage, StreamMessage, CountMessageTokens):
 * the chain of chat completions (`createChatStages`, chat-handler.ts) with the dialect's stages in its slots
 * (`messagesEdges`; dialects/anthropic-messages.ts): decode (Messages → canonical) after the outer stages, the
 * server-tools refusal, and the Anthropic headers right before execute.
 *
 * The decode stage sits after record so a refused body is still recorded, like a refused chat request. The
 * `anthropic-beta` / `anthropic-version` headers of the caller go to the attempts served by an Anthropic
 * endpoint. Counting runs validate → preset → route → plan and asks the first planned endpoint that offers counting
 * (Anthropic's `count_tokens`), else estimates (docs/dialects.md).
 */
import type { HandlerContext } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { callerOf } from "../auth.js";
import { CountTokensRequest, MessagesRequest } from "../../contract/requests/messages-request.js";
import { checkRules } from "../errors.js";
import { newCall, type ChatCall, type ChatStage } from "./pipeline/stage.js";
import { chatChain, type DialectEdges } from "./pipeline/chain.js";
import { createServerToolsRefusalStage } from "./pipeline/server-tools.js";
import type { ChatStages } from "./chat-handler.js";
import { untilOutcome } from "./pipeline/keepalive.js";
import { countInputTokens } from "./pipeline/count-tokens.js";
import { sessionHeaderOf } from "./pipeline/context.js";
import { bodyOf } from "./request-body.js";
import { decodeRequest, encodeResponse, MessagesStreamEncoder, type MessageEvent } from "./dialects/anthropic-messages.js";
import type { CanonicalRequest } from "./model.js";
import { PackedItems, packedMessages, sizeOfEvent } from "./pack.js";

interface Headers {
  anthropicBeta: string;
  anthropicVersion: string;
}

interface DialectRequest extends Headers {
  body?: JsonObject;
  bodyJson?: string;
}

export interface MessagesDeps {
  stages: ChatStages;
  brand: string;
  logger: Logger;
  keepaliveMs: number;
  budgetOf(ctx: HandlerContext): number | undefined;
  withUpstreamTime(err: unknown, upstreamMs: number): unknown;
}

/** Replaces the raw Messages body with the canonical request (400 naming the Messages field when invalid). */
const decodeStage: ChatStage = {
  name: "decode",
  run(call, next) {
    const body = checkRules(() => MessagesRequest.parse(call.request));
    call.request = decodeRequest(body);
    return next();
  },
};

/** The caller's Anthropic headers on the attempts an Anthropic endpoint serves. */
function headersStage(h: Headers): ChatStage {
  return {
    name: "anthropic-headers",
    run(call, next) {
      if (h.anthropicBeta === "" && h.anthropicVersion === "") return next();
      for (const a of call.attempts) {
        if (a.adapter.format !== "anthropic") continue;
        const options: Record<string, string> = { ...a.call.options };
        if (h.anthropicBeta !== "") options.anthropic_beta = h.anthropicBeta;
        if (h.anthropicVersion !== "") options.anthropic_version = h.anthropicVersion;
        a.call = { ...a.call, options };
      }
      return next();
    },
  };
}

/** The Messages dialect's stages in the chain's slots (pipeline/chain.ts), for a request's Anthropic headers. */
export function messagesEdges(brand: string): (h: Headers) => DialectEdges {
  const serverTools = createServerToolsRefusalStage({ brand, route: "POST /api/v1/messages" });
  return (h) => ({ decode: decodeStage, serverTools, beforeExecute: headersStage(h) });
}

export function createMessagesMethods(deps: MessagesDeps) {
  const { stages } = deps;
  const edges = messagesEdges(deps.brand);
  const pipelineFor = (h: Headers) => chatChain(stages.chain, edges(h));
  const headersOf = (req: DialectRequest): Headers => ({ anthropicBeta: req.anthropicBeta, anthropicVersion: req.anthropicVersion });
  const run = (call: ChatCall, req: DialectRequest) =>
    pipelineFor(headersOf(req))(call).catch((err: unknown) => Promise.reject(deps.withUpstreamTime(err, call.track.upstreamMs)));
  const raw = (body: JsonObject | undefined) => (body ?? {}) as unknown as CanonicalRequest;

  return {
    async createMessage(req: DialectRequest, ctx: HandlerContext) {
      const call = newCall(callerOf(ctx), ctx.signal, false, raw(bodyOf(req)), deps.budgetOf(ctx), sessionHeaderOf(ctx));
      call.track.dialect = "messages";
      const outcome = await run(call, req);
      if (outcome.kind !== "completion") throw new Error("the chat pipeline answered a non-streaming request with a stream");
      return { messageJson: JSON.stringify(encodeResponse(outcome.completion)), upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
    },

    async *streamMessage(req: DialectRequest, ctx: HandlerContext) {
      const call = newCall(callerOf(ctx), ctx.signal, true, raw(bodyOf(req)), deps.budgetOf(ctx), sessionHeaderOf(ctx));
      call.track.dialect = "messages";
      const pending = run(call, req);
      const outcome = yield* untilOutcome(pending, deps.keepaliveMs, { events: [] });
      if (outcome.kind !== "stream") throw new Error("the chat pipeline answered a streaming request with a completion");
      const encoder = new MessagesStreamEncoder(String(call.request.model ?? ""));
      const timing = { upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
      const wire = (events: MessageEvent[]) => events.map((e) => ({ type: e.type, dataJson: JSON.stringify(e.data) }));
      // The events of the canonical events at hand in one message (pack.ts); the closing ones after the last.
      const packed = new PackedItems(outcome.events[Symbol.asyncIterator](), (event) => wire(encoder.push(event)), sizeOfEvent, () => wire(encoder.end()));
      yield* packedMessages(packed, timing, (events) => ({ events }));
    },

    async countMessageTokens(req: DialectRequest, ctx: HandlerContext) {
      const body = checkRules(() => CountTokensRequest.parse(bodyOf(req) ?? {}));
      const call = newCall(callerOf(ctx), ctx.signal, false, decodeRequest(body), deps.budgetOf(ctx));
      const counted = await countInputTokens(call, [...stages.count, headersStage(headersOf(req))], deps.logger);
      return { inputTokens: counted.tokens, exact: counted.exact, provider: counted.provider };
    },
  };
}
