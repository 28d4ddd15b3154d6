/** The calling management key of a management RPC, as a Caller and as the audit actor. */
import type { HandlerContext } from "@connectrpc/connect";
import { actorOf, type Actor } from "../audit/audit-log.js";
import { callerOf, requireManagement, type Caller } from "../auth.js";

export function managerOf(ctx: HandlerContext): { caller: Caller; actor: Actor } {
  const caller = callerOf(ctx);
  requireManagement(caller);
  return { caller, actor: actorOf(caller) };
}
