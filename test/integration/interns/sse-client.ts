/**
 * A raw SSE client for the intern chat endpoint: fetch + eventsource-parser, collecting every
 * `data:` payload (parsed JSON chunks and the `[DONE]` marker) and every comment line.
 */
import { createParser } from "eventsource-parser";
import type { Harness } from "../../helpers/harness.js";
import { createInternRepository } from "../../../src/core/interns/intern-repository.js";

export interface ChatResult {
  status: number;
  headers: Headers;
  /** JSON body of a non-SSE answer. */
  json: any;
  /** Parsed chunks in order (without [DONE]). */
  chunks: any[];
  done: boolean;
  comments: string[];
  raw: string;
}

export interface ChatOptions {
  key?: string;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** Called for each chunk as it arrives; return true to stop reading (abort the request). */
  onChunk?: (chunk: any, all: any[]) => boolean | void;
  rawBody?: string;
  /** Stop reading (abort the request) after this many milliseconds of streaming; the result so far is returned. */
  readForMs?: number;
}

export async function createTestIntern(h: Harness, name = `intern-${Math.random().toString(36).slice(2, 8)}`, workspaceId = h.tenant.workspaceId) {
  const { intern, hostToken } = await createInternRepository(h.database.db).createIntern({ workspaceId, name });
  return { internId: intern.id, token: hostToken };
}

export function chatBody(prompt: string, extra: Record<string, unknown> = {}) {
  return { stream: true, messages: [{ role: "user", content: prompt }], ...extra };
}

export function answerBody(sessionId: string, toolCallId: string, answer: string, extra: Record<string, unknown> = {}) {
  return {
    stream: true,
    session_id: sessionId,
    messages: [
      { role: "user", content: "ask" },
      { role: "assistant", content: null, tool_calls: [{ id: toolCallId, function: { name: "service.provide_input", arguments: "{}" } }] },
      { role: "tool", tool_call_id: toolCallId, content: answer },
    ],
    ...extra,
  };
}

export async function chat(h: Harness, internId: string, body: unknown, opts: ChatOptions = {}): Promise<ChatResult> {
  const ac = new AbortController();
  opts.signal?.addEventListener("abort", () => ac.abort());
  const headers: Record<string, string> = { "content-type": "application/json", ...opts.headers };
  if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
  const res = await fetch(`${h.baseUrl}/api/v1/interns/${internId}/chat/completions`, {
    method: "POST",
    headers,
    body: opts.rawBody ?? JSON.stringify(body),
    signal: ac.signal,
  });
  const result: ChatResult = { status: res.status, headers: res.headers, json: undefined, chunks: [], done: false, comments: [], raw: "" };
  if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    result.raw = await res.text();
    try {
      result.json = JSON.parse(result.raw);
    } catch {
      // not JSON
    }
    return result;
  }
  let stop = false;
  const parser = createParser({
    onEvent(ev) {
      if (ev.data === "[DONE]") {
        result.done = true;
        return;
      }
      const chunk = JSON.parse(ev.data);
      result.chunks.push(chunk);
      if (opts.onChunk?.(chunk, result.chunks)) stop = true;
    },
    onComment(c) {
      result.comments.push(c.trim());
    },
  });
  if (opts.readForMs !== undefined) setTimeout(() => ac.abort(), opts.readForMs).unref();
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const text = decoder.decode(value, { stream: true });
      result.raw += text;
      parser.feed(text);
      if (stop) {
        ac.abort();
        break;
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  return result;
}

/** The content of a stream's delta chunks joined. */
export function contentOf(chunks: any[]): string {
  return chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
}

export function finishOf(chunks: any[]): any {
  return chunks.find((c) => c.choices?.[0]?.finish_reason);
}

export function finalOf(chunks: any[]): any {
  return chunks.find((c) => Array.isArray(c.choices) && c.choices.length === 0);
}

export function toolCallOf(chunks: any[]): any {
  return chunks.find((c) => c.choices?.[0]?.delta?.tool_calls)?.choices[0].delta.tool_calls[0];
}
