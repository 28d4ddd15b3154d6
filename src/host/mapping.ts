/**
 * Pure ACP → link mappings: permission questions, usage, model, and the message-tap repairs of
 * known agent quirks. Kept free of I/O so they are tested with fixtures.
 */
import type { AnyMessage } from "@agentclientprotocol/sdk";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { commandOfToolCall } from "./escalation.js";

/** The four permission option kinds, in the canonical order questions list them. */
export const OPTION_KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"] as const;
export type OptionKind = (typeof OPTION_KINDS)[number];

export function isOptionKind(v: string): v is OptionKind {
  return (OPTION_KINDS as readonly string[]).includes(v);
}

const OPERATION_BY_TOOL_KIND: Record<string, string> = {
  execute: "shell",
  edit: "edit",
  delete: "delete",
  move: "move",
  read: "read",
  search: "search",
  fetch: "fetch",
  switch_mode: "mode",
};

/** Question operation from an ACP tool kind: execute → "shell", switch_mode → "mode", others by name; think/other/unknown → undefined. */
export function operationForToolKind(kind: string | null | undefined): string | undefined {
  if (!kind) return undefined;
  return OPERATION_BY_TOOL_KIND[kind];
}

/** A permission option as the agent offered it. */
export interface OfferedOption {
  optionId: string;
  kind: string;
}

/** Distinct offered kinds in canonical order (unknown kinds dropped). */
export function offeredKinds(options: readonly OfferedOption[]): OptionKind[] {
  const seen = new Set(options.map((o) => o.kind));
  return OPTION_KINDS.filter((k) => seen.has(k));
}

/** The option id to answer with for a kind: the first offered option of that kind. */
export function optionIdForKind(options: readonly OfferedOption[], kind: string): string | undefined {
  return options.find((o) => o.kind === kind)?.optionId;
}

/**
 * Self-drive's choice: allow_once; allow_always only when it is the only allow offered; when no
 * allow is offered at all, the first offered option (the agent left nothing to consent to).
 */
export function selfDriveOptionId(options: readonly OfferedOption[]): string | undefined {
  return optionIdForKind(options, "allow_once") ?? optionIdForKind(options, "allow_always") ?? options[0]?.optionId;
}

/** Usage in the link's shape. */
export interface LinkUsage {
  promptTokens: bigint;
  completionTokens: bigint;
  totalTokens: bigint;
  cost?: number;
  cachedTokens?: bigint;
}

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined;
}

function record(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The first of several spellings of a count that is a count. */
function count(r: Record<string, unknown> | undefined, ...names: string[]): number | undefined {
  for (const n of names) {
    const v = num(r?.[n]);
    if (v !== undefined) return v;
  }
  return undefined;
}

/**
 * Token counts of a turn from where the agent reports them: the (unstable) PromptResponse `usage`
 * (`inputTokens`, `outputTokens`, `totalTokens`, `cachedReadTokens`), else the prompt response's
 * `_meta.quota.token_count` (gemini-cli 0.61: `{input_tokens, output_tokens}`; other adapters write the
 * same object in camelCase with `cachedInputTokens`).
 */
function turnTokens(result: unknown): { input?: number; output?: number; total?: number; cached?: number } | undefined {
  const res = record(result);
  const usage = record(res?.usage);
  if (usage && (num(usage.inputTokens) !== undefined || num(usage.outputTokens) !== undefined || num(usage.totalTokens) !== undefined)) {
    return { input: num(usage.inputTokens), output: num(usage.outputTokens), total: num(usage.totalTokens), cached: num(usage.cachedReadTokens) };
  }
  const quota = record(record(record(res?._meta)?.quota)?.token_count);
  if (!quota) return undefined;
  const tokens = {
    input: count(quota, "input_tokens", "inputTokens"),
    output: count(quota, "output_tokens", "outputTokens"),
    total: count(quota, "total_tokens", "totalTokens"),
    cached: count(quota, "cached_input_tokens", "cachedInputTokens", "cached_read_tokens", "cachedReadTokens"),
  };
  return tokens.input === undefined && tokens.output === undefined && tokens.total === undefined ? undefined : tokens;
}

/**
 * Usage of a turn from the agent's `session/prompt` result (its `usage`, else `_meta.quota.token_count`)
 * and the cost delta of usage_update notifications seen during the turn. Undefined when the agent
 * reported neither.
 */
export function usageFromTurn(promptResult: unknown, costDelta: number | undefined): LinkUsage | undefined {
  const t = turnTokens(promptResult);
  const input = t?.input;
  const output = t?.output;
  const total = t?.total;
  const cached = t?.cached;
  if (input === undefined && output === undefined && total === undefined && costDelta === undefined) return undefined;
  const out: LinkUsage = {
    promptTokens: BigInt(input ?? 0),
    completionTokens: BigInt(output ?? 0),
    totalTokens: BigInt(total ?? (input ?? 0) + (output ?? 0)),
  };
  if (costDelta !== undefined) out.cost = Math.max(0, costDelta);
  if (cached !== undefined) out.cachedTokens = BigInt(cached);
  return out;
}

/** USD amount of a usage_update cost, else undefined. */
export function usdCost(cost: unknown): number | undefined {
  if (typeof cost !== "object" || cost === null) return undefined;
  const c = cost as { amount?: unknown; currency?: unknown };
  if (typeof c.amount !== "number" || !Number.isFinite(c.amount)) return undefined;
  if (typeof c.currency === "string" && c.currency.toUpperCase() !== "USD") return undefined;
  return c.amount;
}

/**
 * The model an agent reports: the current value of the configOptions entry with category "model",
 * else the legacy (unstable) models.currentModelId.
 */
export function modelFromSessionState(state: { configOptions?: unknown; models?: unknown }): string | undefined {
  if (Array.isArray(state.configOptions)) {
    for (const o of state.configOptions as Array<Record<string, unknown>>) {
      if (o && o.category === "model" && typeof o.currentValue === "string" && o.currentValue) return o.currentValue;
    }
  }
  const models = state.models as { currentModelId?: unknown } | undefined;
  if (models && typeof models.currentModelId === "string" && models.currentModelId) return models.currentModelId;
  return undefined;
}

/**
 * Repairs known quirks of real agents in raw messages before the SDK validates them (a message that
 * fails validation is dropped silently): usage_update with used/size null → 0. Returns true when the
 * message was changed.
 */
export function repairIncomingMessage(msg: AnyMessage): boolean {
  const m = msg as { method?: unknown; params?: unknown };
  if (m.method !== "session/update" || typeof m.params !== "object" || m.params === null) return false;
  const update = (m.params as { update?: Record<string, unknown> }).update;
  if (!update || update.sessionUpdate !== "usage_update") return false;
  let changed = false;
  for (const f of ["used", "size"]) {
    if (typeof update[f] !== "number") {
      update[f] = 0;
      changed = true;
    }
  }
  return changed;
}

/** Keeps the last `limit` bytes of a buffer, starting at a UTF-8 character boundary. */
export function utf8Tail(buf: Buffer, limit: number): Buffer {
  if (buf.length <= limit) return buf;
  let start = buf.length - limit;
  while (start < buf.length && ((buf[start] ?? 0) & 0xc0) === 0x80) start++;
  return buf.subarray(start);
}

/** Cuts text to at most `max` characters for messages (never secrets; just bounded). */
export function clip(text: string, max = 300): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/**
 * An ACP error as text, with its detail: agents put the cause in JSON-RPC `error.data` ("Internal error"
 * alone says nothing; gemini-cli's failed `session/load` says "No previous sessions found for this project."
 * there). A string is used as is; an object by its message/details field, else as JSON.
 */
export function acpErrorText(err: unknown, max = 400): string {
  const e = (typeof err === "object" && err !== null ? err : {}) as { message?: unknown; data?: unknown };
  const message = typeof e.message === "string" && e.message ? e.message : String(err);
  const detail = acpErrorDataText(e.data);
  return clip(detail && !message.includes(detail) ? `${message}: ${detail}` : message, max);
}

function acpErrorDataText(data: unknown): string | undefined {
  if (data === undefined || data === null) return undefined;
  if (typeof data === "string") return data.trim() || undefined;
  if (typeof data === "object") {
    const d = data as Record<string, unknown>;
    for (const k of ["message", "details", "detail", "error", "reason"]) {
      const v = d[k];
      if (typeof v === "string" && v.trim()) return v.trim();
    }
    try {
      return JSON.stringify(data);
    } catch {
      return undefined;
    }
  }
  return String(data);
}

/** Longest tool title and command line a question carries, in characters. */
const MAX_TOOL_TEXT = 2_000;
/** Largest tool input (as JSON) a question carries; a larger one is left out (title and command remain). */
export const MAX_TOOL_INPUT_BYTES = 8 * 1024;

/**
 * What a permission request asks to run, for the caller's question (`tool` in the `provide_input`
 * arguments): the tool call's `title`, its ACP tool `kind`, the `command` line it names (from `rawInput`
 * `command`/`cmd`, as sealed escalation reads it) and its `input` (`rawInput` as the agent gave it, when
 * it is at most {@link MAX_TOOL_INPUT_BYTES} as JSON). Undefined when the request says none of these.
 */
export function requestedTool(toolCall: { title?: string | null; rawInput?: unknown }, kind: string | null | undefined): JsonObject | undefined {
  const tool: JsonObject = {};
  if (typeof toolCall.title === "string" && toolCall.title.trim()) tool.title = clip(toolCall.title, MAX_TOOL_TEXT);
  if (kind) tool.kind = kind;
  const command = commandOfToolCall(toolCall.rawInput);
  if (command) tool.command = clip(command, MAX_TOOL_TEXT);
  if (toolCall.rawInput !== undefined && toolCall.rawInput !== null) {
    let json: string | undefined;
    try {
      json = JSON.stringify(toolCall.rawInput);
    } catch {
      json = undefined;
    }
    if (json !== undefined && Buffer.byteLength(json) <= MAX_TOOL_INPUT_BYTES) tool.input = JSON.parse(json) as JsonValue;
  }
  return Object.keys(tool).length > 0 ? tool : undefined;
}
