/**
 * Embedding endpoints of the providers (docs/dialects.md, "Embeddings"): one client per wire format, chosen by the
 * provider's chat adapter format (the registry's providers, src/core/chat/providers/index.ts).
 *
 * - OpenAI-compatible (`openai`, groq, mistral, together, fireworks, …, operator-added servers): `POST <base>/embeddings`
 *   with `model`, `input`, `dimensions`, `user`, always asking for `encoding_format: "float"` (Portico encodes
 *   base64 itself, so servers without base64 serve base64 callers too); the answer's `data` and `usage` are kept.
 * - Gemini (`google-ai-studio`): one text → `POST <base>/models/<model>:embedContent`; several →
 *   `:batchEmbedContents` (one request per text, in order; at most GEMINI_BATCH_LIMIT per call, a longer list in
 *   several calls one after the other); `dimensions` → `outputDimensionality`. Gemini takes text only (token-id inputs are refused naming `input`) and has no end-user field (`user` is not sent). Its
 *   answers carry no token count unless it sends `usageMetadata.promptTokenCount`; without it the prompt tokens
 *   are Portico's count with the o200k tokenizer (src/lib/token-count.ts), documented as an estimate.
 * - Anthropic has no embeddings API: refused (400 naming `model`) before anything is sent.
 *
 * Failures are `UpstreamError`s like the chat adapters' (the execute stage's attempt loop classifies them); a key
 * never appears in a message or a returned body.
 */
import { invalidArgument } from "../../errors.js";
import { tokenCounter } from "../../../lib/token-count.js";
import { joinUrl, postJson, readJsonRedacted } from "./http.js";
import { geminiErrorMessage } from "./gemini.js";
import { openAiErrorMessage } from "./openai-compatible.js";
import { UpstreamError, type ProviderAdapter, type UpstreamCall } from "./types.js";

/** What an embeddings endpoint answered: one vector per input, in input order. */
export interface EmbeddingResult {
  vectors: number[][];
  /** Prompt tokens as the provider counted them, or Portico's count (`estimated`). */
  promptTokens: number;
  estimated: boolean;
  /** The model the provider says served it, when it says. */
  model?: string;
}

export interface Embedder {
  /** The provider request body this client sends for `call` (never the key). */
  upstreamBody(call: UpstreamCall): unknown;
  embed(call: UpstreamCall): Promise<EmbeddingResult>;
}

type Input = string | string[] | number[] | number[][];
const inputOf = (call: UpstreamCall) => (call.body as unknown as { input: Input }).input;
const isTokens = (input: Input) => Array.isArray(input) && (typeof input[0] === "number" || Array.isArray(input[0]));

/** A body that is not what the provider promised: a retryable failure without a status (as the chat adapters). */
const malformed = (what: string) => new UpstreamError(0, `upstream returned ${what}`, true);

function vectorOf(value: unknown, where: string): number[] {
  if (Array.isArray(value) && value.every((v) => typeof v === "number")) return value as number[];
  // A server that answers base64 although float was asked for: little-endian float32.
  if (typeof value === "string") return decodeBase64Floats(value);
  throw malformed(`no vector for ${where}`);
}

/** Little-endian float32 bytes (OpenAI's base64 encoding) → numbers. */
export function decodeBase64Floats(b64: string): number[] {
  const buf = Buffer.from(b64, "base64");
  const out = new Array<number>(buf.length >> 2);
  for (let i = 0; i < out.length; i++) out[i] = buf.readFloatLE(i * 4);
  return out;
}

/** Numbers → little-endian float32 bytes in base64 (what OpenAI answers for `encoding_format: "base64"`). */
export function encodeBase64Floats(vector: readonly number[]): string {
  const buf = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) buf.writeFloatLE(vector[i]!, i * 4);
  return buf.toString("base64");
}

export const openAICompatibleEmbedder: Embedder = {
  upstreamBody(call) {
    const b = call.body as unknown as { input: Input; dimensions?: number; user?: string };
    return {
      model: call.model,
      input: b.input,
      ...(b.dimensions !== undefined ? { dimensions: b.dimensions } : {}),
      ...(b.user !== undefined ? { user: b.user } : {}),
      encoding_format: "float",
    };
  },
  async embed(call) {
    const response = await postJson({
      url: joinUrl(call.baseUrl, "embeddings"),
      headers: call.apiKey === "" ? {} : { authorization: `Bearer ${call.apiKey}` },
      body: this.upstreamBody(call),
      signal: call.signal,
      apiKey: call.apiKey,
      errorMessage: openAiErrorMessage,
      firstByteTimeoutMs: call.firstByteTimeoutMs,
    });
    const value = await readJsonRedacted(response, call.apiKey) as { data?: unknown; usage?: { prompt_tokens?: unknown; total_tokens?: unknown }; model?: unknown };
    if (!Array.isArray(value?.data)) {
      const message = openAiErrorMessage(value);
      throw new UpstreamError(message ? 502 : 0, message ? `upstream error: ${message}` : "upstream returned no embeddings", true, value);
    }
    const input = inputOf(call);
    const expected = typeof input === "string" || (Array.isArray(input) && typeof input[0] === "number") ? 1 : input.length;
    const vectors = new Array<number[]>(expected);
    value.data.forEach((d: { index?: unknown; embedding?: unknown }, i: number) => {
      const index = typeof d?.index === "number" ? d.index : i;
      if (!Number.isInteger(index) || index < 0 || index >= expected) throw malformed(`an embedding for input ${String(index)}, which was not sent`);
      vectors[index] = vectorOf(d?.embedding, `input ${index}`);
    });
    for (let i = 0; i < expected; i++) if (vectors[i] === undefined) throw malformed(`no embedding for input ${i}`);
    const prompt = value.usage?.prompt_tokens;
    const counted = typeof prompt === "number" && Number.isFinite(prompt) && prompt >= 0;
    return {
      vectors,
      promptTokens: counted ? prompt : await estimateTokens(input),
      estimated: !counted,
      ...(typeof value.model === "string" ? { model: value.model } : {}),
    };
  },
};

const geminiModel = (call: UpstreamCall) => call.model.replace(/^models\//, "");

/** The most requests Gemini takes in one `batchEmbedContents` call; longer lists are sent in several, in order. */
export const GEMINI_BATCH_LIMIT = 100;

type GeminiAnswer = { embedding?: { values?: unknown }; embeddings?: Array<{ values?: unknown }>; usageMetadata?: { promptTokenCount?: unknown } };

function geminiBody(call: UpstreamCall, texts: string | string[]): Record<string, unknown> {
  const b = call.body as unknown as { dimensions?: number };
  const dims = b.dimensions !== undefined ? { outputDimensionality: b.dimensions } : {};
  const content = (text: string) => ({ parts: [{ text }] });
  if (typeof texts === "string") return { content: content(texts), ...dims };
  const model = `models/${geminiModel(call)}`;
  return { requests: texts.map((text) => ({ model, content: content(text), ...dims })) };
}

async function geminiPost(call: UpstreamCall, method: "embedContent" | "batchEmbedContents", body: unknown): Promise<GeminiAnswer> {
  const response = await postJson({
    url: joinUrl(call.baseUrl, `models/${encodeURIComponent(geminiModel(call))}:${method}`),
    headers: { "x-goog-api-key": call.apiKey },
    body,
    signal: call.signal,
    apiKey: call.apiKey,
    errorMessage: geminiErrorMessage,
    firstByteTimeoutMs: call.firstByteTimeoutMs,
  });
  return await readJsonRedacted(response, call.apiKey) as GeminiAnswer;
}

const promptCount = (value: GeminiAnswer): number | undefined => {
  const n = value?.usageMetadata?.promptTokenCount;
  return typeof n === "number" && Number.isFinite(n) && n >= 0 ? n : undefined;
};

export const geminiEmbedder: Embedder = {
  /** The request for the whole input (a list longer than GEMINI_BATCH_LIMIT is sent in several such requests). */
  upstreamBody(call) {
    const input = inputOf(call);
    if (isTokens(input)) throw invalidArgument("input", "input: Gemini embedding models take text; token ids cannot be sent to them");
    return geminiBody(call, input as string | string[]);
  },
  async embed(call) {
    const input = inputOf(call);
    this.upstreamBody(call);
    if (typeof input === "string") {
      const value = await geminiPost(call, "embedContent", geminiBody(call, input));
      const counted = promptCount(value);
      return { vectors: [vectorOf(value?.embedding?.values, "the input")], promptTokens: counted ?? (await estimateTokens(input)), estimated: counted === undefined };
    }
    const texts = input as string[];
    const vectors: number[][] = [];
    let prompt: number | undefined = 0;
    for (let from = 0; from < texts.length; from += GEMINI_BATCH_LIMIT) {
      const part = texts.slice(from, from + GEMINI_BATCH_LIMIT);
      const value = await geminiPost(call, "batchEmbedContents", geminiBody(call, part));
      const list = value?.embeddings;
      if (!Array.isArray(list) || list.length !== part.length) {
        const message = geminiErrorMessage(value);
        throw new UpstreamError(message ? 502 : 0, message ? `upstream error: ${message}` : "upstream returned a different number of embeddings than inputs", true, value);
      }
      list.forEach((e, i) => vectors.push(vectorOf(e?.values, `input ${from + i}`)));
      const counted = promptCount(value);
      prompt = prompt === undefined || counted === undefined ? undefined : prompt + counted;
    }
    return { vectors, promptTokens: prompt ?? (await estimateTokens(texts)), estimated: prompt === undefined };
  },
};

/** The embeddings client of a provider's adapter; undefined when its provider has no embeddings API (Anthropic). */
export function embedderFor(adapter: ProviderAdapter): Embedder | undefined {
  if (adapter.format === "openai") return openAICompatibleEmbedder;
  if (adapter.format === "gemini") return geminiEmbedder;
  return undefined;
}

/**
 * Portico's count of an input's tokens where the provider reports none: texts counted with the o200k tokenizer
 * (src/lib/token-count.ts), token-id lists by their length.
 */
export async function estimateTokens(input: Input): Promise<number> {
  if (typeof input === "string" || (Array.isArray(input) && typeof input[0] === "string")) {
    const count = await tokenCounter();
    const texts = typeof input === "string" ? [input] : (input as string[]);
    return texts.reduce((n, t) => n + count(t), 0);
  }
  if (Array.isArray(input) && Array.isArray(input[0])) return (input as number[][]).reduce((n, t) => n + t.length, 0);
  return (input as number[]).length;
}
