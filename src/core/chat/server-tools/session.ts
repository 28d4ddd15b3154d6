/**
 * A request's server tools, prepared by the server-tools stage (../pipeline/server-tools.ts) for the loop in
 * the execute stage (loop.ts): the tools to run by function name, the bounds of the loop, and what is recorded.
 */
import type { ChatToolChoice } from "../../../contract/requests/chat-request.js";
import type { ActiveTool } from "./tools.js";

/** `stop_server_tools_when` conditions (the description's shapes and the fact sheet's three more). */
export type StopCondition =
  | { type: "step_count_is"; step_count: number }
  | { type: "max_cost"; max_cost_in_dollars: number }
  | { type: "max_tokens_used"; max_tokens: number }
  | { type: "has_tool_call"; tool_name: string }
  | { type: "finish_reason_is"; reason: string };

/** One server tool call, as recorded on the generation (no arguments, no results). */
export interface ServerToolCallRecord {
  type: string;
  name: string;
  ok: boolean;
  ms: number;
}

/** What the generation record keeps of the server tools that ran (the `serverTools` column, JSON). */
export interface ServerToolsRecord {
  /** Model calls the loop made. */
  turns: number;
  /** Calls per server tool type. */
  counts: Record<string, number>;
  /** The calls, in order (at most {@link MAX_RECORDED_CALLS}; `counts` has them all). */
  calls: ServerToolCallRecord[];
  /** Why the loop stopped offering tools, when a bound did: `max_turns`, or the `stop_server_tools_when` condition type. */
  stoppedBy?: string;
}

export const MAX_RECORDED_CALLS = 64;

export interface ServerToolSession {
  /** The server tools by the function name offered to the model. */
  tools: Map<string, ActiveTool>;
  /** Most model calls (the operator's PORTICO_SERVER_TOOLS_MAX_TURNS). */
  maxTurns: number;
  stops: StopCondition[];
  /** `tool_choice` of the first model call (the caller's, a server-tool choice turned into its function name). */
  firstChoice: ChatToolChoice | undefined;
  /** `tool_choice` of the later calls: the caller's, except a forced choice (`required`, a server tool) becomes `auto`. */
  laterChoice: ChatToolChoice | undefined;
  record: ServerToolsRecord;
}
