/**
 * The walk over OpenAI chat messages that the translating adapters (Anthropic, Gemini) share: system and
 * developer messages are collected apart, user/assistant/tool messages become turns of provider parts,
 * and consecutive turns of the same role are merged. Each adapter supplies how one part is written.
 */
import { contentText, parseDataUrl } from "./http.js";
import type { ChatMessage, ChatMessageOf, ChatToolCall } from "../../../contract/requests/chat-request.js";

export interface PartWriter<P> {
  /** A text part; `part` is the OpenAI content part it came from (absent for plain string content). */
  text(text: string, part?: Record<string, unknown>): P;
  /** An image by URL; `inline` is set for a base64 data URL. */
  image(url: string, inline: { mediaType: string; data: string } | undefined, part: Record<string, unknown>): P;
  toolCall(call: ChatToolCall): P;
  /** A `tool` message's result; `name` is the function of the matching earlier tool call, if any. */
  toolResult(message: ChatMessageOf<"tool">, name: string | undefined): P;
  /** An assistant message's reasoning to send back (its `reasoning_details`), written before its other parts. */
  reasoning?(message: ChatMessageOf<"assistant">): P[];
}

export interface Turn<P> {
  role: "user" | "assistant";
  parts: P[];
}

function contentParts<P>(content: ChatMessage["content"], writer: PartWriter<P>, textOnly: boolean): P[] {
  if (typeof content === "string") return content === "" ? [] : [writer.text(content)];
  if (!Array.isArray(content)) return [];
  const parts: P[] = [];
  for (const part of content) {
    if (part?.type === "text") parts.push(writer.text(String(part.text ?? ""), part));
    else if (part?.type === "image_url" && !textOnly) {
      const image = part.image_url as { url?: unknown } | string | undefined;
      const url = typeof image === "string" ? image : typeof image?.url === "string" ? image.url : undefined;
      if (url) parts.push(writer.image(url, parseDataUrl(url), part));
    }
  }
  return parts;
}

export interface Turns<P> {
  /** The system and developer messages' text, joined by a blank line. */
  system: string | undefined;
  /** The same as parts, one per text part, for providers that take a list (and per-part options). */
  systemParts: P[];
  turns: Turn<P>[];
}

export function toTurns<P>(input: readonly ChatMessage[], writer: PartWriter<P>): Turns<P> {
  const system: string[] = [];
  const systemParts: P[] = [];
  const turns: Turn<P>[] = [];
  const toolNames = new Map<string | undefined, string>();
  const push = (role: Turn<P>["role"], parts: P[]) => {
    if (parts.length === 0) return;
    const last = turns.at(-1);
    if (last && last.role === role) last.parts.push(...parts);
    else turns.push({ role, parts });
  };
  for (const m of input) {
    switch (m.role) {
      case "system":
      case "developer":
        system.push(contentText(m.content));
        systemParts.push(...contentParts(m.content, writer, true));
        break;
      case "user":
        push("user", contentParts(m.content, writer, false));
        break;
      case "assistant": {
        const parts = [...(writer.reasoning?.(m) ?? []), ...contentParts(m.content, writer, true)];
        for (const tc of m.tool_calls ?? []) {
          toolNames.set(tc.id, tc.function?.name);
          parts.push(writer.toolCall(tc));
        }
        push("assistant", parts);
        break;
      }
      case "tool":
        push("user", [writer.toolResult(m, toolNames.get(String(m.tool_call_id)))]);
        break;
      default:
        break;
    }
  }
  return { system: system.length > 0 ? system.join("\n\n") : undefined, systemParts, turns };
}
