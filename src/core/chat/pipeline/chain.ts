/**
 * The order of the chat pipeline's stages, written once (docs/architecture.md, "The chat pipeline"). Chat
 * completions, the Anthropic Messages dialect and the Responses dialect run this same chain; a dialect only adds
 * its own stages at two edges: `decode` (its body → the canonical request) right after the outer stages, and
 * `beforeExecute` (e.g. the Messages dialect's headers for the Anthropic adapter) right before the attempts run.
 *
 * Adding a stage to every dialect: one field in `ChainStages`, one place in `chatChain`, one line where
 * chat-handler.ts builds the stages.
 */
import { compose, type ChatCall, type ChatOutcome, type ChatStage } from "./stage.js";

export interface ChainStages {
  /** (trace, when tracing is on,) record, limits, rate, cost: the stages before the request is read. */
  outer: readonly ChatStage[];
  validate: ChatStage;
  /** Content logging (docs/operations.md, "Content logging"): keeps the validated request and the answer. */
  content?: ChatStage;
  preset: ChatStage;
  /** The router plugins (docs/plugins.md): choose the request's model before the cache key and the plan see it. */
  route: ChatStage;
  /**
   * Server tools (docs/plugins.md, "Server tools"): refuses the kinds not run, prepares the loop the execute stage
   * runs; before the cache, which leaves requests with server tools alone.
   */
  serverTools: ChatStage;
  /** What the Messages, Responses and Gemini dialects run in place of `serverTools` (they refuse a preset's server tools). */
  serverToolsRefusal?: { messages: ChatStage; responses: ChatStage; gemini: ChatStage };
  /** The response cache (docs/operations.md): a hit answers here. */
  cache: ChatStage;
  plan: ChatStage;
  /** Runs the request's plugins[] (docs/plugins.md). */
  plugins: ChatStage;
  /** Reserves the request's largest possible cost against the key's limit and the workspace's budget (docs/limits.md). */
  spend: ChatStage;
  execute: ChatStage;
}

export interface DialectEdges {
  decode?: ChatStage;
  /** In place of `serverTools`: a dialect that does not run the server-tool loop refuses server tools (a preset's). */
  serverTools?: ChatStage;
  beforeExecute?: ChatStage;
}

/** The whole chain, with a dialect's stages at its edges. */
export function chatChain(s: ChainStages, edges: DialectEdges = {}): (call: ChatCall) => Promise<ChatOutcome> {
  return compose([
    ...s.outer,
    ...(edges.decode ? [edges.decode] : []),
    s.validate,
    ...(s.content ? [s.content] : []),
    s.preset,
    s.route,
    edges.serverTools ?? s.serverTools,
    s.cache,
    s.plan,
    s.plugins,
    s.spend,
    ...(edges.beforeExecute ? [edges.beforeExecute] : []),
    s.execute,
  ]);
}
