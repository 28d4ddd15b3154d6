/**
 * The plugins stage's contract for one plugin (docs/plugins.md). A plugin is one module exporting a `Plugin`;
 * the stage (index.ts) runs the request's `plugins[]` entries that are switched on, in a fixed order (moderation
 * first: it sees the input as the caller sent it), each with its own report, which the generation records.
 */
import type { ChatCall, ChatOutcome } from "../stage.js";

/** What one plugin did on one request: its `id` and its own fields (counts and flags, never content). */
export type { PluginReport } from "../../model.js";
import type { PluginReport } from "../../model.js";

/** One plugins[] entry as it runs. */
export interface PluginRun {
  /** The entry as validated (its `id` and options). */
  readonly options: Readonly<Record<string, unknown>>;
  /** The entry's wire path, `plugins[<i>]`, for errors naming a field. */
  readonly field: string;
  /** What it did: recorded on the generation (track.plugins) and shown on the answer. */
  readonly report: PluginReport;
}

export interface Plugin {
  readonly id: string;
  /** Order among the plugins of one request: lower runs first before the model call (and last after it). */
  readonly order: number;
  /**
   * Before plan (the plugins' routing stage, index.ts): a router plugin chooses the request's `model` here.
   * A plugin with this hook is run by that stage only; its report is recorded there.
   */
  route?(call: ChatCall, run: PluginRun): Promise<void> | void;
  /**
   * Before plan too (the routing stage, after the router), for a plugin that is not a router: fusion names its
   * judge as the request's model here. Its report is recorded by the plugins stage, which runs `before` later.
   */
  prepare?(call: ChatCall, run: PluginRun): Promise<void> | void;
  /** Before the model call (after plan): may change the request or the attempts, or throw a refusal. */
  before?(call: ChatCall, run: PluginRun): Promise<void> | void;
  /** After the model call: may change or wrap the outcome (a stream by wrapping `events`). */
  after?(call: ChatCall, run: PluginRun, outcome: ChatOutcome): ChatOutcome;
}
