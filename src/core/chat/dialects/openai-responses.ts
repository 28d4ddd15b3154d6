/**
 * The OpenAI Responses dialect at the core's edge (`POST /api/v1/responses`, docs/dialects.md), stateless: a
 * Responses body decoded into the canonical request (model.ts, OpenAI chat-completions names), and the canonical
 * answer encoded into a `response` object or into the exact event sequence OpenAI streams:
 *
 *   response.created · response.in_progress · per output item: response.output_item.added · its parts and deltas
 *   · response.output_item.done · response.completed (usage) | response.incomplete (max_output_tokens, content filter)
 *   — or, after the first event, `error` and `response.failed`, and nothing more
 *
 * Every event carries `sequence_number` (from 0). Output items open in the order the answer produces them and one
 * is done before the next is added: reasoning (its text as one `summary_text` part), the assistant message (one
 * `output_text` part), each function call (its arguments as `response.function_call_arguments.delta` pieces as
 * they arrive). Reasoning keeps what a provider needs to take it back (Anthropic's thinking signatures, redacted
 * thinking) in the item's `encrypted_content` (when `include` asks for `reasoning.encrypted_content`): Portico's
 * own encoding of the canonical `reasoning_details`, restored when the item is sent back.
 */
import type { ChatFunctionTool } from "../../../contract/requests/chat-request.js";
import type { CanonicalRequest, CanonicalResponse, ReasoningDetail, StreamEvent, ToolCall, Usage } from "../model.js";
import { withoutGeminiSignatures } from "../providers/types.js";
import { createHash } from "node:crypto";
import type { ResponsesRequest, ResponsesTool } from "../../../contract/requests/responses-request.js";
import { fail } from "../../../contract/requests/kit.js";

type Json = Record<string, unknown>;

/** Routing fields shared with chat completions, passed on under the same names. */
const SHARED_FIELDS = ["models", "provider", "plugins", "session_id", "trace", "user", "service_tier", "stop_server_tools_when", "prompt_cache_key", "cache"] as const;

/** The prefix of Portico's `encrypted_content`: the canonical reasoning details as base64url JSON. */
const BLOB_PREFIX = "portico.r1.";

/** A reasoning item's `encrypted_content` carrying `details`. */
export function encodeReasoningBlob(details: readonly ReasoningDetail[]): string {
  // Keys in one order, so a streamed answer's blob is the same as the non-streamed one's.
  const ordered = details.map((d, index) =>
    d.type === "reasoning.encrypted"
      ? { type: d.type, data: d.data, ...(d.format !== undefined ? { format: d.format } : {}), index }
      : { type: d.type, text: d.text ?? "", ...(d.signature != null ? { signature: d.signature } : {}), ...(d.format !== undefined ? { format: d.format } : {}), index },
  );
  return BLOB_PREFIX + Buffer.from(JSON.stringify(ordered), "utf8").toString("base64url");
}

/** The details a Portico `encrypted_content` carries; undefined for any other value. */
export function decodeReasoningBlob(blob: string): ReasoningDetail[] | undefined {
  if (!blob.startsWith(BLOB_PREFIX)) return undefined;
  try {
    const details = JSON.parse(Buffer.from(blob.slice(BLOB_PREFIX.length), "base64url").toString("utf8")) as unknown;
    if (!Array.isArray(details)) return undefined;
    const ok = details.every(
      (d: Json) =>
        d !== null &&
        typeof d === "object" &&
        ((d.type === "reasoning.text" && (d.text === undefined || typeof d.text === "string")) || (d.type === "reasoning.encrypted" && typeof d.data === "string")),
    );
    return ok ? (details as ReasoningDetail[]) : undefined;
  } catch {
    return undefined;
  }
}

type Part = { type: string; text?: string; image_url?: string; detail?: string; refusal?: string };

/** A user-side content part as a canonical part (images only where `images` allows them). */
function partOf(p: Part, path: string, images: boolean): Json {
  if (p.type === "input_text" || p.type === "output_text") return { type: "text", text: p.text };
  if (p.type === "input_image") {
    if (!images) fail(`${path}.type`, `${path}.type input_image is only accepted in user messages and function call outputs`);
    return { type: "image_url", image_url: { url: p.image_url, ...(p.detail !== undefined ? { detail: p.detail } : {}) } };
  }
  return fail(`${path}.type`, `${path}.type refusal is only accepted in assistant messages`);
}

interface Turn {
  texts: string[];
  refusal: string;
  toolCalls: ToolCall[];
  reasoning: string;
  details: ReasoningDetail[];
}

/** A namespace member's name and namespace, as the client declared them. */
export interface NamespacedName {
  namespace: string;
  name: string;
}

/** The names of a request's namespace members: qualified function name ↔ namespace + name. */
export interface NamespaceNames {
  /** Qualified (flattened) function name → the member it stands for. */
  members: Map<string, NamespacedName>;
  /** `namespace\0name` → qualified name. */
  qualified: Map<string, string>;
}

const VALID_FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const memberKey = (namespace: string, name: string) => `${namespace}\u0000${name}`;

/** `<namespace>__<name>` when that is a valid function name; else a sanitised, shortened form with a hash of both. */
export function qualifiedName(namespace: string, name: string, hashed = false): string {
  const plain = `${namespace}__${name}`;
  if (!hashed && VALID_FUNCTION_NAME.test(plain)) return plain;
  const hash = createHash("sha256").update(memberKey(namespace, name)).digest("hex").slice(0, 10);
  return `${plain.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 53)}_${hash}`;
}

/**
 * The qualified names of the namespace members of `tools`, deterministic for the same tools: `<namespace>__<name>`,
 * or the hashed form when that is not a valid function name or is already taken (a top-level function's name, or
 * another member's). A member declared twice in one namespace, or a name clash the hash cannot resolve, is refused
 * naming the field.
 */
export function namespaceNames(tools: readonly ResponsesTool[] | undefined): NamespaceNames {
  const members = new Map<string, NamespacedName>();
  const qualified = new Map<string, string>();
  if (!tools) return { members, qualified };
  const taken = new Set(tools.filter((t) => t.type === "function").map((t) => t.name));
  tools.forEach((t, i) => {
    if (t.type !== "namespace") return;
    t.tools.forEach((m, j) => {
      const path = `tools[${i}].tools[${j}].name`;
      const key = memberKey(t.name, m.name);
      if (qualified.has(key)) fail(path, `${path} "${m.name}" is declared twice in namespace "${t.name}"`);
      let name = qualifiedName(t.name, m.name);
      if (taken.has(name)) name = qualifiedName(t.name, m.name, true);
      if (taken.has(name)) fail(path, `${path} "${m.name}" of namespace "${t.name}" cannot be given a function name distinct from the other tools' (${name} is taken); rename it`);
      taken.add(name);
      members.set(name, { namespace: t.name, name: m.name });
      qualified.set(key, name);
    });
  });
  return { members, qualified };
}

/** The canonical function tools of the Responses `tools` (namespace members flattened under their qualified names). */
function canonicalTools(tools: readonly ResponsesTool[], names: NamespaceNames): ChatFunctionTool[] {
  const fn = (name: string, t: { description?: string | null; parameters?: Json | null; strict?: boolean | null }, description = t.description): ChatFunctionTool => ({
    type: "function",
    function: {
      name,
      ...(typeof description === "string" ? { description } : {}),
      ...(t.parameters ? { parameters: t.parameters } : {}),
      ...(typeof t.strict === "boolean" ? { strict: t.strict } : {}),
    },
  });
  return tools.flatMap((t) => {
    if (t.type === "function") return [fn(t.name, t)];
    const about = typeof t.description === "string" && t.description.trim() !== "" ? t.description.trim() : "";
    return t.tools.map((m) => {
      const own = typeof m.description === "string" ? m.description : "";
      const description = about === "" ? m.description : own === "" ? `${t.name}: ${about}` : `${own}\n\n(Tool "${m.name}" of ${t.name}: ${about})`;
      return fn(names.qualified.get(memberKey(t.name, m.name))!, m, description);
    });
  });
}

/** A validated Responses body as the canonical request. */
export function decodeRequest(body: ResponsesRequest): CanonicalRequest {
  const names = namespaceNames(body.tools);
  const messages: Json[] = [];
  if (typeof body.instructions === "string" && body.instructions !== "") messages.push({ role: "system", content: body.instructions });
  let turn: Turn | undefined;
  const open = (): Turn => (turn ??= { texts: [], refusal: "", toolCalls: [], reasoning: "", details: [] });
  const flush = () => {
    if (!turn) return;
    const t = turn;
    turn = undefined;
    const out: Json = { role: "assistant", content: t.texts.length > 0 ? t.texts.join("") : t.toolCalls.length > 0 ? null : "" };
    if (t.refusal !== "") out.refusal = t.refusal;
    if (t.toolCalls.length > 0) out.tool_calls = t.toolCalls;
    if (t.reasoning !== "") out.reasoning = t.reasoning;
    if (t.details.length > 0) out.reasoning_details = t.details.map((d, index) => ({ ...d, index }));
    messages.push(out);
  };

  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else {
    body.input.forEach((item, i) => {
      const path = `input[${i}]`;
      switch (item.type) {
        case "message": {
          if (item.role === "assistant") {
            const t = open();
            if (typeof item.content === "string") t.texts.push(item.content);
            else
              item.content.forEach((p, j) => {
                if (p.type === "output_text" || p.type === "input_text") t.texts.push(p.text);
                else if (p.type === "refusal") t.refusal += p.refusal;
                else fail(`${path}.content[${j}].type`, `${path}.content[${j}].type input_image is only accepted in user messages and function call outputs`);
              });
            return;
          }
          flush();
          const content =
            typeof item.content === "string" ? item.content : item.content.map((p, j) => partOf(p as Part, `${path}.content[${j}]`, item.role === "user"));
          messages.push({ role: item.role, content });
          return;
        }
        case "function_call": {
          // A namespace member's call goes back under its qualified name (the one the upstream was offered).
          const name = item.namespace !== undefined ? (names.qualified.get(memberKey(item.namespace, item.name)) ?? qualifiedName(item.namespace, item.name)) : item.name;
          open().toolCalls.push({ id: item.call_id, type: "function", function: { name, arguments: item.arguments } });
          return;
        }
        case "reasoning": {
          const t = open();
          const text = item.content && item.content.length > 0 ? item.content.map((c) => c.text).join("") : item.summary.map((s) => s.text).join("");
          t.reasoning += text;
          if (typeof item.encrypted_content === "string") {
            const details = decodeReasoningBlob(item.encrypted_content);
            if (!details) {
              fail(`${path}.encrypted_content`, `${path}.encrypted_content was not issued by Portico (reasoning encrypted by another service cannot be sent to these providers); omit it`);
            }
            t.details.push(...details);
          }
          return;
        }
        case "function_call_output": {
          flush();
          const content = typeof item.output === "string" ? item.output : item.output.map((p, j) => partOf(p as Part, `${path}.output[${j}]`, true));
          messages.push({ role: "tool", tool_call_id: item.call_id, content });
          return;
        }
      }
    });
  }
  flush();

  // The messages are built as JSON records (each dialect's parts as they map): a narrow cast; the rest is checked.
  const req: CanonicalRequest = { model: body.model, messages: messages as CanonicalRequest["messages"] };
  if (body.tools !== undefined && body.tools.length > 0) req.tools = canonicalTools(body.tools, names);
  const choice = body.tool_choice;
  if (choice !== undefined) req.tool_choice = typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } };
  if (typeof body.parallel_tool_calls === "boolean") req.parallel_tool_calls = body.parallel_tool_calls;
  if (body.reasoning) {
    const summary = body.reasoning.summary ?? body.reasoning.generate_summary;
    const r: Json = {};
    if (body.reasoning.effort != null) r.effort = body.reasoning.effort;
    if (summary != null) r.summary = summary;
    if (Object.keys(r).length > 0) req.reasoning = r;
  }
  if (typeof body.max_output_tokens === "number") req.max_tokens = body.max_output_tokens;
  if (typeof body.temperature === "number") req.temperature = body.temperature;
  if (typeof body.top_p === "number") req.top_p = body.top_p;
  const format = body.text?.format;
  if (format) {
    req.response_format =
      format.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: {
              name: format.name,
              schema: format.schema,
              ...(format.description !== undefined ? { description: format.description } : {}),
              ...(typeof format.strict === "boolean" ? { strict: format.strict } : {}),
            },
          }
        : { type: format.type };
  }
  if (typeof body.text?.verbosity === "string") req.verbosity = body.text.verbosity;
  if (body.metadata) req.metadata = body.metadata;
  if (body.stream === true) req.stream = true;
  // Shared fields pass under the same names, as this dialect's schema validated them: a narrow cast for the loop.
  for (const key of SHARED_FIELDS) if (body[key] !== undefined) (req as Json)[key] = body[key];
  return req;
}

/** The request's fields a `response` object repeats, and the encoding options (`include`). */
export interface Echo {
  instructions: string | null;
  max_output_tokens: number | null;
  metadata: Record<string, string>;
  parallel_tool_calls: boolean;
  reasoning: { effort: string | null; summary: string | null };
  temperature: number;
  text: Json;
  tool_choice: unknown;
  tools: Json[];
  top_p: number;
  user: string | null;
  /** `include` has `reasoning.encrypted_content`. */
  encrypted: boolean;
  /** Qualified function name → the namespace member it stands for (a call to it is given back as `name` + `namespace`). */
  namespaced: Map<string, NamespacedName>;
}

export function echoOf(body: ResponsesRequest | undefined): Echo {
  return {
    instructions: body?.instructions ?? null,
    max_output_tokens: body?.max_output_tokens ?? null,
    metadata: body?.metadata ?? {},
    parallel_tool_calls: body?.parallel_tool_calls ?? true,
    reasoning: { effort: body?.reasoning?.effort ?? null, summary: body?.reasoning?.summary ?? body?.reasoning?.generate_summary ?? null },
    temperature: body?.temperature ?? 1,
    text: { format: body?.text?.format ?? { type: "text" }, ...(body?.text?.verbosity ? { verbosity: body.text.verbosity } : {}) },
    tool_choice: body?.tool_choice ?? "auto",
    tools: (body?.tools ?? []).map((t) =>
      t.type === "namespace"
        ? { type: "namespace", name: t.name, description: t.description ?? "", tools: t.tools.map((m) => ({ type: "function", name: m.name, description: m.description ?? null, parameters: m.parameters ?? null, strict: m.strict ?? null })) }
        : { type: "function", name: t.name, description: t.description ?? null, parameters: t.parameters ?? null, strict: t.strict ?? null },
    ),
    top_p: body?.top_p ?? 1,
    user: typeof body?.user === "string" ? body.user : null,
    encrypted: body?.include?.includes("reasoning.encrypted_content") === true,
    namespaced: namespaceNames(body?.tools).members,
  };
}

/** The Responses usage of canonical usage (input tokens include cached ones, as in chat completions). */
export function usageOf(u: Usage | null | undefined): Json {
  const input = u?.prompt_tokens ?? 0;
  const output = u?.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u?.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: u?.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: u?.total_tokens ?? input + output,
  };
}

type Status = "completed" | "incomplete";

/** The response's status and `incomplete_details` of a finish reason. */
export function statusOf(finish: string | null | undefined): { status: Status; incomplete: Json | null } {
  if (finish === "length") return { status: "incomplete", incomplete: { reason: "max_output_tokens" } };
  if (finish === "content_filter") return { status: "incomplete", incomplete: { reason: "content_filter" } };
  return { status: "completed", incomplete: null };
}

interface Shell {
  id: string;
  created: number;
  model: string;
  status: string;
  output: Json[];
  usage: Json | null;
  error?: Json | null;
  incomplete?: Json | null;
}

/** A `response` object: the answer's own fields and the request's echoed ones. */
function responseObject(s: Shell, echo: Echo): Json {
  return {
    id: s.id,
    object: "response",
    created_at: s.created,
    status: s.status,
    background: false,
    error: s.error ?? null,
    incomplete_details: s.incomplete ?? null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    metadata: echo.metadata,
    model: s.model,
    output: s.output,
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: null,
    reasoning: echo.reasoning,
    store: false,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_p: echo.top_p,
    truncation: "disabled",
    usage: s.usage,
    user: echo.user,
  };
}

/**
 * A copy of JSON data (plain objects, arrays, primitives), keys in their order: an event's snapshot of an output
 * item the encoder goes on changing. Several times cheaper than structuredClone on these small items.
 */
function copyJson<T>(v: T): T {
  if (Array.isArray(v)) return v.map(copyJson) as T;
  if (v === null || typeof v !== "object") return v;
  const o: Json = {};
  for (const k of Object.keys(v)) o[k] = copyJson((v as Json)[k]);
  return o as T;
}

const itemId = (prefix: string, responseId: string, index: number) => `${prefix}_${responseId}_${index}`;

function reasoningItem(id: string, text: string, details: readonly ReasoningDetail[], echo: Echo): Json {
  const item: Json = { id, type: "reasoning", summary: text !== "" ? [{ type: "summary_text", text }] : [] };
  if (echo.encrypted) item.encrypted_content = details.length > 0 ? encodeReasoningBlob(details) : null;
  return item;
}

const textPart = (text: string, annotations: Json[] = []): Json => ({ type: "output_text", text, annotations, logprobs: [] });

/** A chat `url_citation` annotation (the web plugin's) as a Responses `output_text` annotation (flat `url_citation`). */
export function responsesAnnotation(a: unknown): Json | undefined {
  const c = (a as { type?: unknown; url_citation?: { url?: unknown; title?: unknown; start_index?: unknown; end_index?: unknown } } | undefined);
  if (c?.type !== "url_citation" || typeof c.url_citation?.url !== "string") return undefined;
  const u = c.url_citation;
  return { type: "url_citation", start_index: typeof u.start_index === "number" ? u.start_index : 0, end_index: typeof u.end_index === "number" ? u.end_index : 0, url: u.url, title: typeof u.title === "string" ? u.title : "" };
}

const responsesAnnotations = (list: unknown): Json[] => (Array.isArray(list) ? list.map(responsesAnnotation).filter((a): a is Json => a !== undefined) : []);

/** A function call's `name` (and `namespace` when it calls a namespace member) as the client declared them. */
function callName(name: string, echo: Echo): { name: string; namespace?: string } {
  const member = echo.namespaced.get(name);
  return member ? { name: member.name, namespace: member.namespace } : { name };
}

/** The canonical answer as a `response` object; its `id` is the generation id. */
export function encodeResponse(completion: CanonicalResponse, echo: Echo): Json {
  const choice = completion.choices[0];
  const msg = choice?.message;
  const { status, incomplete } = statusOf(choice?.finish_reason);
  const output: Json[] = [];
  // Gemini's thought signatures are not carried through this dialect (docs/dialects.md).
  const details = withoutGeminiSignatures(msg?.reasoning_details);
  const reasoning = msg?.reasoning ?? details.map((d) => (d.type === "reasoning.text" ? (d.text ?? "") : "")).join("");
  if (reasoning !== "" || details.length > 0) output.push(reasoningItem(itemId("rs", completion.id, output.length), reasoning, details, echo));
  const content: Json[] = [];
  if (typeof msg?.content === "string" && msg.content !== "") content.push(textPart(msg.content, responsesAnnotations((msg as { annotations?: unknown }).annotations)));
  const refusal = (msg as { refusal?: unknown } | undefined)?.refusal;
  if (typeof refusal === "string" && refusal !== "") content.push({ type: "refusal", refusal });
  if (content.length > 0) output.push({ id: itemId("msg", completion.id, output.length), type: "message", status, role: "assistant", content });
  for (const tc of msg?.tool_calls ?? []) {
    output.push({ id: itemId("fc", completion.id, output.length), type: "function_call", status: "completed", call_id: tc.id, ...callName(tc.function.name, echo), arguments: tc.function.arguments });
  }
  return responseObject({ id: completion.id, created: completion.created, model: completion.model, status, output, usage: usageOf(completion.usage), incomplete }, echo);
}

/** OpenAI's error `type` for an HTTP status. */
export function errorTypeOf(status: number): string {
  switch (status) {
    case 400:
    case 404:
    case 409:
    case 413:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "insufficient_quota";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    default:
      return "server_error";
  }
}

/** OpenAI's error envelope: `{error: {message, type, param, code}}`. */
export function errorBody(status: number, message: string, param: string | null = null, code: string | null = null): Json {
  return { error: { message, type: errorTypeOf(status), param, code } };
}

/** The `code` of a failed response's `error` (OpenAI's names) for an HTTP status. */
export function failureCodeOf(status: number): string {
  return status === 429 ? "rate_limit_exceeded" : "server_error";
}

/** One server-sent event of the dialect: its `event:` name and its `data:` object (with `type` and `sequence_number`). */
export interface ResponseEvent {
  type: string;
  data: Json;
}

type OpenItem =
  | { kind: "reasoning"; index: number; text: string; summaryOpen: boolean; details: ReasoningDetail[] }
  | { kind: "message"; index: number; parts: Array<{ type: "output_text" | "refusal"; text: string; annotations?: Json[] }> }
  | { kind: "tool"; index: number; tool: number };

/**
 * Turns canonical stream events into Responses events, one encoder per stream. `push` takes each event in order;
 * `end` gives the closing events once the stream ended normally (not after an error).
 */
export class ResponsesStreamEncoder {
  private seq = 0;
  private started = false;
  private ended = false;
  private id = "";
  private created = 0;
  private model: string;
  /** The output items so far, each in its current (or done) state. */
  private readonly output: Json[] = [];
  private open: OpenItem | undefined;
  /** Tool call index → its output index (a tool call's pieces go to its item). */
  private readonly toolItems = new Map<number, number>();
  private finish: string | null = null;
  private usage: Usage | undefined;

  constructor(
    fallbackModel: string,
    private readonly echo: Echo,
  ) {
    this.model = fallbackModel;
  }

  push(event: StreamEvent): ResponseEvent[] {
    if (this.ended) return [];
    const out: ResponseEvent[] = [];
    if (!this.started) this.start(event, out);
    if (event.error !== undefined) {
      this.ended = true;
      const code = failureCodeOf(event.error.code);
      this.emit(out, "error", { code, message: event.error.message, param: null });
      this.emit(out, "response.failed", { response: this.shell("failed", { error: { code, message: event.error.message } }) });
      return out;
    }
    if (event.usage) this.usage = event.usage;
    const choice = event.choices?.[0];
    if (!choice) return out;
    const delta = choice.delta ?? {};
    const details = withoutGeminiSignatures(delta.reasoning_details);
    if (details.length > 0) {
      for (const d of details) this.reasoningDetail(d, out);
    } else if (typeof delta.reasoning === "string" && delta.reasoning !== "") {
      this.reasoningText(this.reasoningOpen(out), delta.reasoning, out);
    }
    if (typeof delta.content === "string" && delta.content !== "") {
      const { item, at } = this.messagePart("output_text", out);
      item.parts[at]!.text += delta.content;
      // The one event of most chunks, written out (emit's copy of its data is the encoder's largest per-chunk cost).
      const type = "response.output_text.delta";
      out.push({ type, data: { type, item_id: this.itemIdAt(item.index), output_index: item.index, content_index: at, delta: delta.content, logprobs: [], sequence_number: this.seq++ } });
    }
    // An OpenAI-compatible upstream's refusal: a `refusal` part of the message.
    const refusal = (delta as { refusal?: unknown }).refusal;
    if (typeof refusal === "string" && refusal !== "") {
      const { item, at } = this.messagePart("refusal", out);
      item.parts[at]!.text += refusal;
      this.emit(out, "response.refusal.delta", { item_id: this.itemIdAt(item.index), output_index: item.index, content_index: at, delta: refusal });
    }
    for (const tc of delta.tool_calls ?? []) {
      let index = this.toolItems.get(tc.index);
      if (index === undefined) {
        this.closeOpen(out);
        index = this.output.length;
        const item = { id: itemId("fc", this.id, index), type: "function_call", status: "in_progress", call_id: tc.id ?? "", ...callName(tc.function?.name ?? "", this.echo), arguments: "" };
        this.output.push(item);
        this.open = { kind: "tool", index, tool: tc.index };
        this.toolItems.set(tc.index, index);
        this.emit(out, "response.output_item.added", { output_index: index, item: { ...item } });
      }
      const piece = tc.function?.arguments;
      if (piece) {
        const item = this.output[index]!;
        item.arguments = String(item.arguments) + piece;
        const type = "response.function_call_arguments.delta";
        out.push({ type, data: { type, item_id: item.id, output_index: index, delta: piece, sequence_number: this.seq++ } });
      }
    }
    // The web plugin's citations (on the finishing chunk): one response.output_text.annotation.added each, on the open
    // message's output_text part, before it is done.
    const annotations = responsesAnnotations((delta as { annotations?: unknown }).annotations);
    if (annotations.length > 0 && this.open?.kind === "message") {
      const open = this.open;
      const at = open.parts.findIndex((p) => p.type === "output_text");
      if (at >= 0) {
        const part = open.parts[at]!;
        for (const annotation of annotations) {
          part.annotations = [...(part.annotations ?? []), annotation];
          this.emit(out, "response.output_text.annotation.added", { item_id: this.itemIdAt(open.index), output_index: open.index, content_index: at, annotation_index: part.annotations.length - 1, annotation });
        }
      }
    }
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.closeOpen(out);
    }
    return out;
  }

  /** The closing events of a stream that ended normally: `response.completed` (or `response.incomplete`) with usage. */
  end(): ResponseEvent[] {
    if (this.ended) return [];
    this.ended = true;
    const out: ResponseEvent[] = [];
    if (!this.started) this.start(undefined, out);
    this.closeOpen(out);
    const { status, incomplete } = statusOf(this.finish);
    this.emit(out, status === "completed" ? "response.completed" : "response.incomplete", { response: this.shell(status, { usage: usageOf(this.usage), incomplete }) });
    return out;
  }

  private emit(out: ResponseEvent[], type: string, data: Json): void {
    out.push({ type, data: { type, ...data, sequence_number: this.seq++ } });
  }

  private shell(status: string, extra: { usage?: Json; error?: Json; incomplete?: Json | null } = {}): Json {
    return responseObject(
      { id: this.id, created: this.created, model: this.model, status, output: this.output.map((i) => copyJson(i)), usage: extra.usage ?? null, error: extra.error ?? null, incomplete: extra.incomplete ?? null },
      this.echo,
    );
  }

  private start(event: StreamEvent | undefined, out: ResponseEvent[]): void {
    this.started = true;
    this.id = event?.id ?? "";
    this.created = event?.created ?? Math.floor(Date.now() / 1000);
    if (event?.model) this.model = event.model;
    this.emit(out, "response.created", { response: this.shell("in_progress") });
    this.emit(out, "response.in_progress", { response: this.shell("in_progress") });
  }

  private itemIdAt(index: number): string {
    return String(this.output[index]!.id);
  }

  private reasoningOpen(out: ResponseEvent[]): Extract<OpenItem, { kind: "reasoning" }> {
    if (this.open?.kind === "reasoning") return this.open;
    this.closeOpen(out);
    const index = this.output.length;
    const item: Json = { id: itemId("rs", this.id, index), type: "reasoning", summary: [] };
    if (this.echo.encrypted) item.encrypted_content = null;
    this.output.push(item);
    const open = { kind: "reasoning" as const, index, text: "", summaryOpen: false, details: [] };
    this.open = open;
    this.emit(out, "response.output_item.added", { output_index: index, item: copyJson(item) });
    return open;
  }

  private reasoningText(item: Extract<OpenItem, { kind: "reasoning" }>, text: string, out: ResponseEvent[]): void {
    const base = { item_id: this.itemIdAt(item.index), output_index: item.index, summary_index: 0 };
    if (!item.summaryOpen) {
      item.summaryOpen = true;
      this.emit(out, "response.reasoning_summary_part.added", { ...base, part: { type: "summary_text", text: "" } });
    }
    item.text += text;
    const type = "response.reasoning_summary_text.delta";
    out.push({ type, data: { type, item_id: base.item_id, output_index: base.output_index, summary_index: 0, delta: text, sequence_number: this.seq++ } });
  }

  private reasoningDetail(d: ReasoningDetail, out: ResponseEvent[]): void {
    const item = this.reasoningOpen(out);
    if (d.type === "reasoning.encrypted") {
      item.details.push({ ...d, index: item.details.length });
      return;
    }
    // Pieces with the same index extend one detail (text appended, the signature arriving last).
    const at = d.index ?? 0;
    type Piece = { type: "reasoning.text"; text?: string; signature?: string | null; format?: string; at?: number };
    let detail = item.details.find((x) => (x as Piece).at === at) as Piece | undefined;
    if (!detail) {
      const created: Piece = { type: "reasoning.text", text: "", ...(d.format ? { format: d.format } : {}), at };
      item.details.push(created);
      detail = created;
    }
    if (d.text) {
      detail.text = (detail.text ?? "") + d.text;
      this.reasoningText(item, d.text, out);
    }
    if (d.signature) detail.signature = d.signature;
  }

  /** The open message's part of `type` (the message and the part opened when needed) and its content index. */
  private messagePart(type: "output_text" | "refusal", out: ResponseEvent[]): { item: Extract<OpenItem, { kind: "message" }>; at: number } {
    let open = this.open;
    if (open?.kind !== "message") {
      this.closeOpen(out);
      const index = this.output.length;
      const item = { id: itemId("msg", this.id, index), type: "message", status: "in_progress", role: "assistant", content: [] };
      this.output.push(item);
      open = { kind: "message" as const, index, parts: [] };
      this.open = open;
      this.emit(out, "response.output_item.added", { output_index: index, item: copyJson(item) });
    }
    let at = 0;
    while (at < open.parts.length && open.parts[at]!.type !== type) at++;
    if (at === open.parts.length) {
      at = open.parts.length;
      open.parts.push({ type, text: "" });
      this.emit(out, "response.content_part.added", { item_id: this.itemIdAt(open.index), output_index: open.index, content_index: at, part: type === "refusal" ? { type, refusal: "" } : textPart("") });
    }
    return { item: open, at };
  }

  private closeOpen(out: ResponseEvent[]): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    const item = this.output[open.index]!;
    const base = { item_id: item.id, output_index: open.index };
    if (open.kind === "reasoning") {
      if (open.summaryOpen) {
        this.emit(out, "response.reasoning_summary_text.done", { ...base, summary_index: 0, text: open.text });
        this.emit(out, "response.reasoning_summary_part.done", { ...base, summary_index: 0, part: { type: "summary_text", text: open.text } });
        item.summary = [{ type: "summary_text", text: open.text }];
      }
      if (this.echo.encrypted) {
        const details = open.details.map(({ at: _at, ...d }: ReasoningDetail & { at?: number }, index) => ({ ...d, index }) as ReasoningDetail);
        item.encrypted_content = details.length > 0 ? encodeReasoningBlob(details) : null;
      }
    } else if (open.kind === "message") {
      const content = open.parts.map((p, at) => {
        const part = p.type === "refusal" ? { type: "refusal", refusal: p.text } : textPart(p.text, p.annotations);
        if (p.type === "refusal") this.emit(out, "response.refusal.done", { ...base, content_index: at, refusal: p.text });
        else this.emit(out, "response.output_text.done", { ...base, content_index: at, text: p.text, logprobs: [] });
        this.emit(out, "response.content_part.done", { ...base, content_index: at, part });
        return part;
      });
      item.content = content;
      item.status = statusOf(this.finish).status;
    } else {
      this.emit(out, "response.function_call_arguments.done", { ...base, name: item.name, arguments: item.arguments });
      item.status = "completed";
    }
    this.emit(out, "response.output_item.done", { output_index: open.index, item: copyJson(item) });
  }
}
