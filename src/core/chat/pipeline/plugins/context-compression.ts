/**
 * Plugin "context-compression", engine "middle-out" (the only engine; docs/plugins.md): when a planned attempt's
 * prompt exceeds its endpoint's context length (the model catalog's `context_length`, less the request's
 * `max_tokens` / `max_completion_tokens` when given), messages are removed from the middle of the conversation
 * until it fits: system and developer messages and the last message are kept, the others are removed nearest
 * the middle first, an assistant message with tool calls together with the tool results that answer it. When
 * removing every removable message is not enough, the longest kept text is cut in its middle ("…" marks the
 * cut). Each attempt gets the prompt compressed for its own endpoint (fallbacks may have other context lengths);
 * an attempt whose endpoint the catalog does not know is sent unchanged (its context length is unknown).
 *
 * Counting: src/lib/token-count.ts (gpt-tokenizer's o200k_base, loaded on first use) over each message's
 * text (string content, text parts, tool call names and arguments) plus 4 tokens per message; another part (an
 * image, a file) counts as 1,000 tokens. An estimate: other providers' tokenizers count differently. A prompt
 * whose UTF-8 bytes are within the limit is not tokenized (a byte-level BPE never makes more tokens than bytes).
 *
 * The report (counts, never content): `tokens_before` (the prompt as sent by the caller), and per context
 * length that needed compression `{context_length, limit, tokens_after, messages_removed, messages_truncated,
 * fits}` in `compressed`; `uncatalogued_attempts` when some attempt's context length is unknown.
 */
import { tokenCounter } from "../../../../lib/token-count.js";
import type { CanonicalRequest } from "../../model.js";
import type { Plugin, PluginReport } from "./types.js";
import type { Attempt } from "../stage.js";

type Message = Record<string, unknown>;
type Counter = (text: string) => number;

/** Tokens added per message (role and separators), as OpenAI's chat format counts them. */
const PER_MESSAGE = 4;
/** An image, audio or file part: a rough fixed estimate. */
const NON_TEXT_PART = 1_000;
const CUT_MARK = "\n…\n";

function textsOf(m: Message): { texts: string[]; others: number } {
  const texts: string[] = [];
  let others = 0;
  const content = m.content;
  if (typeof content === "string") texts.push(content);
  else if (Array.isArray(content)) {
    for (const part of content as Array<{ type?: unknown; text?: unknown }>) {
      if (part?.type === "text" && typeof part.text === "string") texts.push(part.text);
      else others++;
    }
  }
  if (Array.isArray(m.tool_calls)) {
    for (const t of m.tool_calls as Array<{ function?: { name?: unknown; arguments?: unknown } }>) {
      if (typeof t?.function?.name === "string") texts.push(t.function.name);
      if (typeof t?.function?.arguments === "string") texts.push(t.function.arguments);
    }
  }
  return { texts, others };
}

function bytesOf(m: Message): number {
  const { texts, others } = textsOf(m);
  return texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0) + others * NON_TEXT_PART + PER_MESSAGE;
}

function tokensOf(m: Message, count: Counter): number {
  const { texts, others } = textsOf(m);
  return texts.reduce((n, t) => n + count(t), 0) + others * NON_TEXT_PART + PER_MESSAGE;
}

/** Groups of message indices removed together: an assistant message with tool calls and the tool messages after it. */
function unitsOf(messages: readonly Message[]): number[][] {
  const units: number[][] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role === "tool" && units.length > 0) {
      const last = units.at(-1)!;
      const head = messages[last[0]!]!;
      if ((head.role === "assistant" && Array.isArray(head.tool_calls)) || head.role === "tool") {
        last.push(i);
        continue;
      }
    }
    units.push([i]);
  }
  return units;
}

/** `text` cut in its middle to about `keep` tokens (head and tail halves). */
function cutMiddle(text: string, keep: number, count: Counter): string {
  let chars = Math.max(0, Math.floor(text.length * (keep / Math.max(1, count(text)))));
  for (let i = 0; i < 20; i++) {
    const half = Math.floor(chars / 2);
    const out = half > 0 ? text.slice(0, half) + CUT_MARK + text.slice(text.length - half) : CUT_MARK.trim();
    if (count(out) <= keep || chars === 0) return out;
    chars = Math.floor(chars * 0.9);
  }
  return CUT_MARK.trim();
}

export interface Compression {
  messages: Message[];
  tokensBefore: number;
  tokensAfter: number;
  removed: number;
  truncated: number;
  fits: boolean;
}

/** Compresses `messages` to at most `limit` tokens (middle-out, see the module comment). */
export function middleOut(messages: readonly Message[], limit: number, count: Counter): Compression {
  const tokens = messages.map((m) => tokensOf(m, count));
  const total = (keep: ReadonlySet<number>) => [...keep].reduce((n, i) => n + tokens[i]!, 0);
  const tokensBefore = tokens.reduce((a, b) => a + b, 0);
  const kept = new Set(messages.map((_, i) => i));
  let removed = 0;
  if (tokensBefore > limit) {
    const last = messages.length - 1;
    const removable = unitsOf(messages).filter((u) => !u.includes(last) && !u.some((i) => messages[i]!.role === "system" || messages[i]!.role === "developer"));
    let used = tokensBefore;
    while (used > limit && removable.length > 0) {
      // The middle one; of two, the later (the first turn is kept longest: some providers need a user turn first).
      const unit = removable.splice(Math.floor(removable.length / 2), 1)[0]!;
      for (const i of unit) {
        kept.delete(i);
        used -= tokens[i]!;
        removed++;
      }
    }
  }
  const out = messages.filter((_, i) => kept.has(i)).map((m) => ({ ...m }));
  let truncated = 0;
  let used = total(kept);
  // Still too long: cut the longest kept string content in its middle, as often as it takes (each at most once).
  const cut = new Set<number>();
  while (used > limit) {
    let longest = -1;
    for (let i = 0; i < out.length; i++) {
      if (cut.has(i) || typeof out[i]!.content !== "string") continue;
      if (longest < 0 || tokensOf(out[i]!, count) > tokensOf(out[longest]!, count)) longest = i;
    }
    if (longest < 0) break;
    cut.add(longest);
    const before = tokensOf(out[longest]!, count);
    const keep = Math.max(0, before - (used - limit) - PER_MESSAGE - count(CUT_MARK));
    out[longest]!.content = cutMiddle(out[longest]!.content as string, keep, count);
    truncated++;
    used = used - before + tokensOf(out[longest]!, count);
  }
  return { messages: out, tokensBefore, tokensAfter: used, removed, truncated, fits: used <= limit };
}

/** The prompt's room on an endpoint: its context length less the completion tokens the request asks room for. */
function limitOf(contextLength: number, body: Readonly<Record<string, unknown>>): number {
  const reserve = [body.max_completion_tokens, body.max_tokens].find((v) => typeof v === "number" && v > 0) as number | undefined;
  return Math.max(1, contextLength - (reserve ?? 0));
}

export function createContextCompressionPlugin(): Plugin {
  return {
    id: "context-compression",
    order: 20,
    async before(call, run) {
      const report: PluginReport = run.report;
      report.engine = (run.options.engine as string | undefined) ?? "middle-out";
      // Each attempt's own messages (file-parser, which runs first, may have turned its PDFs into text).
      const messagesOf = (a: Attempt) => (a.call.body.messages ?? call.request.messages ?? []) as Message[];
      const bytesMemo = new Map<Message[], number>();
      const bytesOfAll = (ms: Message[]) => bytesMemo.get(ms) ?? bytesMemo.set(ms, ms.reduce((n, m) => n + bytesOf(m), 0)).get(ms)!;
      const byLimit = new Map<string, { limit: number; messages: Message[]; attempts: Attempt[] }>();
      const sources: Message[][] = [];
      let unknown = 0;
      for (const a of call.attempts) {
        const context = a.endpoint?.context_length;
        if (typeof context !== "number" || context <= 0) {
          unknown++;
          continue;
        }
        const limit = limitOf(context, a.call.body);
        const messages = messagesOf(a);
        // A byte-level BPE never makes more tokens than bytes: within the limit by bytes, nothing to count.
        if (bytesOfAll(messages) <= limit) continue;
        if (!sources.includes(messages)) sources.push(messages);
        const key = `${limit}/${sources.indexOf(messages)}`;
        const group = byLimit.get(key) ?? { limit, messages, attempts: [] };
        group.attempts.push(a);
        byLimit.set(key, group);
      }
      if (unknown > 0) report.uncatalogued_attempts = unknown;
      const compressed: Array<Record<string, unknown>> = [];
      report.compressed = compressed;
      if (byLimit.size === 0) return;
      const count = await tokenCounter();
      for (const { limit, messages, attempts } of [...byLimit.values()].sort((x, y) => x.limit - y.limit)) {
        const c = middleOut(messages, limit, count);
        report.tokens_before = c.tokensBefore;
        if (c.removed === 0 && c.truncated === 0) continue;
        // middleOut works on messages as Records (it keeps each message it keeps as it was): a narrow cast.
        for (const a of attempts) a.call = { ...a.call, body: { ...a.call.body, messages: c.messages as CanonicalRequest["messages"] } };
        compressed.push({
          context_length: attempts[0]!.endpoint!.context_length,
          limit,
          tokens_after: c.tokensAfter,
          messages_removed: c.removed,
          messages_truncated: c.truncated,
          fits: c.fits,
        });
      }
    },
  };
}
