/**
 * Stage "validate": the request against the ChatRequest definition (src/contract/requests/chat-request.ts),
 * the same rules as preset creation. A broken rule is a 400 naming its field. The request's `user`, session,
 * `trace` and `metadata` are then taken for the generation record (context.ts).
 */
import { ChatRequest } from "../../../contract/requests/index.js";
import { checkRules } from "../../errors.js";
import { captureContext } from "./context.js";
import type { ChatCall, ChatStage } from "./stage.js";

export function createValidateStage(deps: { brand: string }): ChatStage {
  return {
    name: "validate",
    run(call, next) {
      if (call.caller.run) useInternModel(call);
      checkRules(() => ChatRequest.check(call.request, { brand: deps.brand }));
      captureContext(call);
      return next();
    },
  };
}

/**
 * A request made with an intern run's credential (docs/interns.md, "Model calls through Portico") uses the
 * intern's model (`<provider>/<model>` or `@preset/<slug>`), whatever model the agent named (agents send bare
 * ids such as `claude-sonnet-4-5`, and side calls with smaller ones); the agent's id is kept for the generation.
 * A fallback list (`models`) or `preset` the agent sent is dropped with it: the intern's model decides.
 */
export function useInternModel(call: ChatCall): void {
  const run = call.caller.run;
  if (!run) return;
  const sent = call.request.model;
  call.track.agentModel = typeof sent === "string" ? sent : "";
  const request: Record<string, unknown> = { ...call.request, model: run.model };
  delete request["models"];
  delete request["preset"];
  call.request = request as typeof call.request;
}
