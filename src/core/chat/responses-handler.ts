/**
 * The OpenAI Responses dialect's RPCs of ChatService (CreateResponse, StreamResponse): the same pipeline as chat
 * completions (`createChatStages`, chat-handler.ts) with the dialect's stages in its slots (`responsesEdges`;
 * dialects/openai-responses.ts): decode (Responses → canonical) after the outer stages, and the server-tools refusal.
 *
 * The decode stage sits after record so a refused body is still recorded, like a refused chat request. The
 * decoded body is kept per call for the encoder (the `response` object repeats request fields, and `include`
 * decides whether reasoning carries `encrypted_content`).
 */
import type { HandlerContext } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import { callerOf } from "../auth.js";
import { ResponsesRequest } from "../../contract/requests/responses-request.js";
import { checkRules } from "../errors.js";
import { newCall, type ChatCall, type ChatStage } from "./pipeline/stage.js";
import { sessionHeaderOf } from "./pipeline/context.js";
import { bodyOf } from "./request-body.js";
import { chatChain, type DialectEdges } from "./pipeline/chain.js";
import { createServerToolsRefusalStage } from "./pipeline/server-tools.js";
import type { ChatStages } from "./chat-handler.js";
import { untilOutcome } from "./pipeline/keepalive.js";
import { decodeRequest, echoOf, encodeResponse, ResponsesStreamEncoder, type ResponseEvent } from "./dialects/openai-responses.js";
import type { CanonicalRequest } from "./model.js";
import { PackedItems, packedMessages, sizeOfEvent } from "./pack.js";

export interface ResponsesDeps {
  stages: ChatStages;
  brand: string;
  keepaliveMs: number;
  budgetOf(ctx: HandlerContext): number | undefined;
  withUpstreamTime(err: unknown, upstreamMs: number): unknown;
}

/** Replaces the raw Responses body with the canonical request (400 naming the Responses field when invalid); keeps the body. */
function decodeStage(keep: { body?: ResponsesRequest }): ChatStage {
  return {
    name: "decode",
    run(call, next) {
      const body = checkRules(() => ResponsesRequest.parse(call.request));
      keep.body = body;
      call.request = checkRules(() => decodeRequest(body));
      return next();
    },
  };
}

/** The Responses dialect's stages in the chain's slots (pipeline/chain.ts), keeping a request's decoded body in `keep`. */
export function responsesEdges(brand: string): (keep: { body?: ResponsesRequest }) => DialectEdges {
  const serverTools = createServerToolsRefusalStage({ brand, route: "POST /api/v1/responses" });
  return (keep) => ({ decode: decodeStage(keep), serverTools });
}

export function createResponsesMethods(deps: ResponsesDeps) {
  const { stages } = deps;
  const edges = responsesEdges(deps.brand);
  const run = (call: ChatCall, keep: { body?: ResponsesRequest }) =>
    chatChain(stages.chain, edges(keep))(call).catch((err: unknown) => Promise.reject(deps.withUpstreamTime(err, call.track.upstreamMs)));
  const raw = (body: JsonObject | undefined) => (body ?? {}) as unknown as CanonicalRequest;

  return {
    async createResponse(req: { body?: JsonObject; bodyJson?: string }, ctx: HandlerContext) {
      const call = newCall(callerOf(ctx), ctx.signal, false, raw(bodyOf(req)), deps.budgetOf(ctx), sessionHeaderOf(ctx));
      call.track.dialect = "responses";
      const keep: { body?: ResponsesRequest } = {};
      const outcome = await run(call, keep);
      if (outcome.kind !== "completion") throw new Error("the chat pipeline answered a non-streaming request with a stream");
      return { responseJson: JSON.stringify(encodeResponse(outcome.completion, echoOf(keep.body))), upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
    },

    async *streamResponse(req: { body?: JsonObject; bodyJson?: string }, ctx: HandlerContext) {
      const call = newCall(callerOf(ctx), ctx.signal, true, raw(bodyOf(req)), deps.budgetOf(ctx), sessionHeaderOf(ctx));
      call.track.dialect = "responses";
      const keep: { body?: ResponsesRequest } = {};
      const pending = run(call, keep);
      const outcome = yield* untilOutcome(pending, deps.keepaliveMs, { events: [] });
      if (outcome.kind !== "stream") throw new Error("the chat pipeline answered a streaming request with a completion");
      const encoder = new ResponsesStreamEncoder(String(call.request.model ?? ""), echoOf(keep.body));
      const timing = { upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
      const wire = (events: ResponseEvent[]) => events.map((e) => ({ type: e.type, dataJson: JSON.stringify(e.data) }));
      // The events of the canonical events at hand in one message (pack.ts); the closing ones after the last.
      const packed = new PackedItems(outcome.events[Symbol.asyncIterator](), (event) => wire(encoder.push(event)), sizeOfEvent, () => wire(encoder.end()));
      yield* packedMessages(packed, timing, (events) => ({ events }));
    },
  };
}
