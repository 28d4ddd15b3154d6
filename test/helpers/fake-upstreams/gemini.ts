/**
 * Fake Gemini upstream: `POST /v1beta/models/<model>:generateContent` and
 * `:streamGenerateContent?alt=sse` (each SSE `data:` a whole GenerateContentResponse; usageMetadata on
 * every event, finishReason on the last).
 */
import { defaultScript, fakeVector, startFake, type FakeUpstream, type Knobs, type Script, type Wire } from "./server.js";

const statuses: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

/** Gemini frames its SSE events with CRLF line ends. */
const sse = (data: unknown): string => `data: ${JSON.stringify(data)}\r\n\r\n`;

const modelOf = (url: string) => decodeURIComponent(/models\/([^:]+):/.exec(url)?.[1] ?? "unknown");

function usage(s: Script, final: boolean) {
  return {
    promptTokenCount: s.usage.input,
    ...(final ? { candidatesTokenCount: s.usage.output } : {}),
    totalTokenCount: s.usage.input + (final ? s.usage.output + (s.usage.reasoning ?? 0) : 0),
    ...(s.usage.cached ? { cachedContentTokenCount: s.usage.cached } : {}),
    ...(s.usage.reasoning ? { thoughtsTokenCount: s.usage.reasoning } : {}),
  };
}

function response(s: Script, url: string, parts: unknown[], finish: string | undefined, final: boolean) {
  return {
    candidates: [{ content: { parts, role: "model" }, ...(finish ? { finishReason: finish } : {}), index: 0 }],
    usageMetadata: usage(s, final),
    modelVersion: s.model ?? modelOf(url),
    responseId: "resp_fake1",
  };
}

function blocked(s: Script, url: string) {
  return { promptFeedback: { blockReason: s.blockReason }, usageMetadata: usage(s, false), modelVersion: s.model ?? modelOf(url), responseId: "resp_fake1" };
}

/** The script's thought signature on the first functionCall part, else on the last text part. */
function sign(s: Script, parts: any[]): void {
  if (!s.signature) return;
  const target = parts.find((p) => p.functionCall) ?? parts.filter((p) => typeof p.text === "string" && !p.thought).at(-1);
  if (target) target.thoughtSignature = s.signature;
}

export const geminiWire: Wire = {
  isStream: (req) => req.url.includes(":streamGenerateContent"),
  // `:embedContent` / `:batchEmbedContents`: fake vectors (fakeVector), no token counts (Gemini reports none);
  // `:countTokens`: the script's input tokens as `totalTokens`.
  other: (s, req) => {
    if (req.url.includes(":countTokens")) return { totalTokens: s.usage.input };
    if (req.url.includes(":embedContent")) return { embedding: { values: fakeVector(0, req.body?.outputDimensionality) } };
    if (req.url.includes(":batchEmbedContents")) {
      return { embeddings: (req.body?.requests ?? []).map((r: any, i: number) => ({ values: fakeVector(i, r.outputDimensionality) })) };
    }
    return undefined;
  },
  errorBody: (status, message) => ({ error: { code: status, message, status: statuses[status] ?? "UNKNOWN" } }),
  streamError: (message) => sse({ error: { code: 503, message, status: "UNAVAILABLE" } }),
  completion: (s, req) => {
    if (s.blockReason) return blocked(s, req.url);
    const parts: any[] = [];
    if (s.reasoning?.length) parts.push({ text: s.reasoning.join(""), thought: true });
    if (s.text.length) parts.push({ text: s.text.join("") });
    for (const t of s.toolCalls ?? []) parts.push({ functionCall: { name: t.name, args: JSON.parse(t.arguments) } });
    sign(s, parts);
    return response(s, req.url, parts, s.finish, true);
  },
  streamEvents: (s, req) => {
    if (s.blockReason) return [sse(blocked(s, req.url))];
    const events: unknown[][] = [];
    for (const piece of s.reasoning ?? []) events.push([{ text: piece, thought: true }]);
    for (const piece of s.text) events.push([{ text: piece }]);
    if (s.toolCalls?.length) events.push(s.toolCalls.map((t) => ({ functionCall: { name: t.name, args: JSON.parse(t.arguments) } })));
    if (events.length === 0) events.push([{ text: "" }]);
    if (s.signature) sign(s, events.find((parts: any[]) => parts.some((p) => p.functionCall)) ?? events.filter((parts: any[]) => parts.some((p) => typeof p.text === "string" && !p.thought)).at(-1) ?? []);
    return events.map((parts, i) => {
      const last = i === events.length - 1;
      return sse(response(s, req.url, parts, last ? s.finish : undefined, last));
    });
  },
};

export function startFakeGemini(script: Script = { ...defaultScript(), finish: "STOP" }, knobs: Knobs = {}): Promise<FakeUpstream> {
  return startFake(geminiWire, script, knobs);
}
