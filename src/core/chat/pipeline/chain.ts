/**
 * The chat pipeline's chain (docs/architecture.md, "The chat pipeline"): one ordered list of entries, written once
 * in chat-handler.ts (`createChatStages`). An entry is a stage, or a named slot where a dialect puts its own stage:
 *
 * - `decode`: the dialect's body → the canonical request (Messages, Responses, Gemini; chat completions decodes
 *   before the chain), right after the outer stages so a refused body is still recorded;
 * - `serverTools`: the server-tools stage, which the Messages, Responses and Gemini dialects replace by a refusal
 *   of a preset's server tools (the loop runs in chat completions only);
 * - `beforeExecute`: a stage right before the attempts run (the Messages dialect's Anthropic headers).
 *
 * Chat completions, Messages, Responses and Gemini run this one list; a dialect only fills slots (its handler's
 * `…Edges`). Adding a stage to every dialect: its module, and one line at its place in the list.
 */
import { compose, type ChatCall, type ChatOutcome, type ChatStage } from "./stage.js";

export type SlotName = "decode" | "serverTools" | "beforeExecute";

/** A place in the chain a dialect fills; `stage` runs there when the dialect does not (none: the place is empty). */
export interface Slot {
  readonly slot: SlotName;
  readonly stage?: ChatStage;
}

export type ChainEntry = ChatStage | Slot;

/** A dialect's stages, by the slot they fill. */
export type DialectEdges = Partial<Record<SlotName, ChatStage>>;

/** A slot of the chain, holding `stage` unless a dialect fills it. */
export function slot(name: SlotName, stage?: ChatStage): Slot {
  return stage ? { slot: name, stage } : { slot: name };
}

/** The stages a dialect runs, in order: the chain's stages, each slot filled by the dialect's stage, else its own, else left out. */
export function chainStages(chain: readonly ChainEntry[], edges: DialectEdges = {}): ChatStage[] {
  const stages: ChatStage[] = [];
  for (const entry of chain) {
    const stage = "slot" in entry ? (edges[entry.slot] ?? entry.stage) : entry;
    if (stage) stages.push(stage);
  }
  return stages;
}

/** The whole chain, with a dialect's stages in its slots. */
export function chatChain(chain: readonly ChainEntry[], edges: DialectEdges = {}): (call: ChatCall) => Promise<ChatOutcome> {
  return compose(chainStages(chain, edges));
}
