/**
 * Stage "validate": the request against the ChatRequest definition (src/contract/requests/chat-request.ts),
 * the same rules as preset creation. A broken rule is a 400 naming its field. The request's `user`, session,
 * `trace` and `metadata` are then taken for the generation record (context.ts).
 */
import { ChatRequest } from "../../../contract/requests/index.js";
import { checkRules } from "../../errors.js";
import { captureContext } from "./context.js";
import type { ChatStage } from "./stage.js";

export function createValidateStage(deps: { brand: string }): ChatStage {
  return {
    name: "validate",
    run(call, next) {
      checkRules(() => ChatRequest.parse(call.request, { brand: deps.brand }));
      captureContext(call);
      return next();
    },
  };
}
