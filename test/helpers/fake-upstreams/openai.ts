/** Fake OpenAI chat-completions upstream (`POST /v1/chat/completions`), wire format as OpenAI sends it. */
import { defaultScript, fakeVector, sse, startFake, type FakeUpstream, type Knobs, type Script, type Wire } from "./server.js";

const errorTypes: Record<number, [string, string | null]> = {
  400: ["invalid_request_error", null],
  401: ["invalid_request_error", "invalid_api_key"],
  403: ["invalid_request_error", "unsupported_country_region_territory"],
  404: ["invalid_request_error", "model_not_found"],
  429: ["requests", "rate_limit_exceeded"],
  500: ["server_error", null],
  503: ["server_error", null],
};

function usage(s: Script) {
  return {
    prompt_tokens: s.usage.input,
    completion_tokens: s.usage.output,
    total_tokens: s.usage.input + s.usage.output,
    prompt_tokens_details: { cached_tokens: s.usage.cached ?? 0 },
    completion_tokens_details: { reasoning_tokens: s.usage.reasoning ?? 0 },
  };
}

export const openAiWire: Wire = {
  isStream: (req) => req.body?.stream === true,
  errorBody: (status, message) => {
    const [type, code] = errorTypes[status] ?? ["server_error", null];
    return { error: { message, type, param: null, code } };
  },
  streamError: (message) => sse({ error: { message, type: "server_error", param: null, code: null } }),
  completion: (s, req) => ({
    id: "chatcmpl-fake1",
    object: "chat.completion",
    created: 1_700_000_000,
    model: s.model ?? req.body?.model,
    system_fingerprint: "fp_fake",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: s.toolCalls?.length && s.text.length === 0 ? null : s.text.join(""),
          refusal: null,
          ...(s.reasoning?.length ? { reasoning: s.reasoning.join("") } : {}),
          ...(s.toolCalls?.length
            ? { tool_calls: s.toolCalls.map((t) => ({ id: t.id, type: "function", function: { name: t.name, arguments: t.arguments } })) }
            : {}),
        },
        logprobs: null,
        finish_reason: s.finish,
      },
    ],
    usage: usage(s),
  }),
  // `POST /v1/embeddings`: one fake vector per input (fakeVector), floats or base64 as asked, usage from the script.
  other: (s, req) => {
    if (!req.url.split("?")[0]!.endsWith("/embeddings")) return undefined;
    const input = req.body?.input;
    const n = typeof input === "string" || typeof input?.[0] === "number" ? 1 : input.length;
    const encode = (v: number[]) => {
      if (req.body?.encoding_format !== "base64") return v;
      const buf = Buffer.alloc(v.length * 4);
      v.forEach((x, j) => buf.writeFloatLE(x, j * 4));
      return buf.toString("base64");
    };
    return {
      object: "list",
      data: Array.from({ length: n }, (_, i) => ({ object: "embedding", index: i, embedding: encode(fakeVector(i, req.body?.dimensions)) })),
      model: s.model ?? req.body?.model,
      usage: { prompt_tokens: s.usage.input, total_tokens: s.usage.input },
    };
  },
  streamEvents: (s, req) => {
    const base = { id: "chatcmpl-fake1", object: "chat.completion.chunk", created: 1_700_000_000, model: s.model ?? req.body?.model, system_fingerprint: "fp_fake" };
    const includeUsage = req.body?.stream_options?.include_usage === true;
    const chunk = (delta: unknown, finish: string | null = null) =>
      sse({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) });
    const frames = [chunk({ role: "assistant", content: "", refusal: null })];
    for (const piece of s.reasoning ?? []) frames.push(chunk({ reasoning: piece }));
    for (const piece of s.text) frames.push(chunk({ content: piece }));
    (s.toolCalls ?? []).forEach((t, index) => {
      frames.push(chunk({ tool_calls: [{ index, id: t.id, type: "function", function: { name: t.name, arguments: "" } }] }));
      for (const piece of t.argumentPieces ?? [t.arguments]) frames.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    });
    frames.push(chunk({}, s.finish));
    if (includeUsage) frames.push(sse({ ...base, choices: [], usage: usage(s) }));
    frames.push(sse("[DONE]"));
    return frames;
  },
};

export function startFakeOpenAI(script: Script = defaultScript(), knobs: Knobs = {}): Promise<FakeUpstream> {
  return startFake(openAiWire, script, knobs);
}
