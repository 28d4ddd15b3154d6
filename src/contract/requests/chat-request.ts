/**
 * The chat-completions request (`ChatRequest`), defined once: its validation (with the service's
 * messages and wire field paths) and its JSON Schema in the OpenAPI document both come from this
 * definition. Built from the API description's ChatRequest, plugins and ProviderPreferences tables,
 * with the "not shown" sub-shapes filled from the API fact sheet §1.8. Unknown top-level fields are
 * accepted (and kept); ProviderPreferences rejects unknown properties.
 *
 * Decisions (see docs/presets.md):
 * - `reasoning_effort` and `reasoning.effort` must be equal when both are given and non-null.
 * - `service_tier` also accepts "fast", the documented alias of "priority".
 * - Server tool types use the configured brand word as prefix (`service:web_search`).
 *
 * Use: `ChatRequest.parse(body, { brand })` gives a typed request or throws RuleViolation naming the
 * first broken field; `ChatRequest.schema(brand)` is the zod schema (for the OpenAPI document).
 */
import {
  anything,
  array,
  boolean,
  byType,
  closedObject,
  discriminated,
  fail,
  integer,
  isPlainObject,
  nullable,
  number,
  object,
  oneOf,
  record,
  string,
  validate,
  z,
} from "./kit.js";

export const MESSAGE_ROLES = ["system", "developer", "user", "assistant", "tool"] as const;
export const REASONING_EFFORTS = ["max", "xhigh", "high", "medium", "low", "minimal", "none"] as const;
export const REASONING_SUMMARIES = ["auto", "concise", "detailed"] as const;
export const SERVICE_TIERS = ["auto", "default", "fast", "flex", "priority", "scale"] as const;
export const MODALITIES = ["text", "image", "audio"] as const;
export const QUANTIZATIONS = [
  "int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32", "unknown",
] as const;
export const PROVIDER_SORTS = ["price", "throughput", "latency", "exacto"] as const;
export const WEB_ENGINES = ["native", "exa", "firecrawl", "parallel", "perplexity"] as const;
/** The web plugin's `engine`: the description's values and Portico's own search engines (docs/plugins.md). */
export const WEB_PLUGIN_ENGINES = [...WEB_ENGINES, "searxng", "brave"] as const;
export const PDF_ENGINES = ["mistral-ocr", "native", "cloudflare-ai", "pdf-text"] as const;
export const COST_TIERS = ["low", "medium", "high", "xhigh", "max"] as const;
export const FUSION_PRESETS = ["general-high", "general-budget", "general-fast"] as const;
export const SWITCHYARD_ALGORITHMS = ["capability", "stage", "auto", "random", "composite", "passthrough"] as const;
export const SERVER_TOOL_KINDS = [
  "advisor", "bash", "datetime", "files", "fusion", "image_generation", "experimental__search_models",
  "subagent", "web_fetch", "web_search",
] as const;
export const WEB_SEARCH_SHORTHANDS = [
  "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
] as const;
export const TRACE_STRING_KEYS = ["trace_id", "trace_name", "span_name", "generation_name", "parent_span_id"] as const;
/**
 * Bounds on what a request says about itself, which the generation records (docs/operations.md, "Request
 * log"): `session_id` as the description says; `user` and each known `trace` key at most 256 characters; the
 * whole `trace` object (its other keys are passed through as custom metadata) at most 32 keys and 4096
 * characters of JSON. `metadata`'s bounds are the description's (16 pairs, 64 / 512 characters).
 */
export const MAX_SESSION_ID_CHARS = 256;
export const MAX_USER_CHARS = 256;
export const MAX_TRACE_VALUE_CHARS = 256;
export const MAX_TRACE_KEYS = 32;
export const MAX_TRACE_JSON_CHARS = 4096;
export const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const FUNCTION_NAME_TEXT = "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -";

const str = () => string();
const strings = () => array(str());

/**
 * Bounds on the lists that drive routing (docs/chat.md, "Limits"): each entry may add upstream attempts, so a
 * list is capped rather than left to the body limit. `models` holds fallbacks to try in order (the real-world
 * service's fallback lists are a handful of models); the provider lists may name every known provider (111
 * display names today) with room to spare.
 */
export const MAX_FALLBACK_MODELS = 16;

/**
 * The bounds of the sampling and length fields, read by the schema and by {@link fastAccepts} (the check of the
 * common shape without zod), so the two cannot hold different ones. `max` absent: no upper bound.
 */
export const NUMBER_BOUNDS = {
  temperature: { min: 0, max: 2 },
  top_p: { min: 0, max: 1 },
  frequency_penalty: { min: -2, max: 2 },
  presence_penalty: { min: -2, max: 2 },
} as const;
export const INTEGER_BOUNDS = {
  max_tokens: { min: 1 },
  max_completion_tokens: { min: 1 },
} as const;
export const MAX_PROVIDER_LIST = 128;
const providerList = () => nullable(array(str(), { max: MAX_PROVIDER_LIST }));
const nullableBool = () => nullable(boolean());
const plainObject = () => object({});
/** The discriminator of one variant of a discriminated object. */
const tag = <const T extends string>(value: T) => z.literal(value);

const cacheControl = () => object({ type: oneOf(["ephemeral"]), ttl: oneOf(["5m", "1h"]) }, { required: ["type"] });

const textPart = object(
  { type: oneOf(["text"]), text: str(), cache_control: cacheControl(), prompt_cache_breakpoint: anything() },
  { required: ["type", "text"] },
);
const textContent = () => byType([str(), array(textPart)], "must be a string or an array of text parts");

/** User and tool content parts: `type` is a string; a text part also needs `text`. */
const contentPart = object({ type: str() }, { required: ["type"] }).superRefine((part, ctx) => {
  if (part.type !== "text") return;
  const res = textPart.safeParse(part);
  if (!res.success) for (const issue of res.error.issues) ctx.addIssue({ ...issue, code: "custom", input: part } as never);
});
const richContent = () => byType([str(), array(contentPart)], "must be a string or an array of content parts");

const toolCall = object(
  {
    id: str(),
    type: oneOf(["function"]),
    function: object({ name: str(), arguments: str() }, { required: ["name"] }),
  },
  { required: ["function"] },
);

const instructionMessage = { content: textContent(), name: str() };
const message = discriminated("role", [
  object({ role: tag("system"), ...instructionMessage }, { required: ["role", "content"] }),
  object({ role: tag("developer"), ...instructionMessage }, { required: ["role", "content"] }),
  object({ role: tag("user"), content: richContent(), name: str() }, { required: ["role", "content"] }),
  object({
    role: tag("assistant"),
    content: nullable(richContent()),
    name: str(),
    tool_calls: array(toolCall),
    refusal: nullable(str()),
    reasoning: nullable(str()),
  }, { required: ["role"] }),
  object({ role: tag("tool"), content: richContent(), tool_call_id: string({ min: 1 }) }, { required: ["role", "content", "tool_call_id"] }),
]);

const modelPatterns = () => array(string({ max: 1024 }), { max: 1024 });
const routerFields = () => ({
  enabled: boolean(),
  allowed_models: modelPatterns(),
  excluded_models: modelPatterns(),
  cost_quality_tradeoff: integer({ min: 0, max: 10 }),
  cost_tier: oneOf(COST_TIERS),
});
const fusionTool = object({ type: string({ min: 1 }), parameters: plainObject() }, { required: ["type"] });
const fusionFields = () => ({
  analysis_models: array(str(), { min: 1, max: 8 }),
  model: str(),
  max_tool_calls: integer({ min: 1, max: 16 }),
  tools: array(fusionTool, { max: 8 }),
});
const userLocation = nullable(
  object(
    { type: oneOf(["approximate"]), city: nullable(str()), country: nullable(str()), region: nullable(str()), timezone: nullable(str()) },
    { required: ["type"] },
  ),
);

/** plugins[] variants, by id. */
const plugin = discriminated("id", [
  object({ id: tag("auto-router"), ...routerFields(), pin_model: boolean() }, { required: ["id"] }),
  object({ id: tag("auto-beta-router"), ...routerFields() }, { required: ["id"] }),
  object({ id: tag("moderation") }, { required: ["id"] }),
  object({
    id: tag("web"),
    enabled: boolean(),
    engine: oneOf(WEB_PLUGIN_ENGINES),
    mode: str(),
    exclude_domains: strings(),
    include_domains: strings(),
    max_results: integer({ min: 1 }),
    max_uses: integer({ min: 1 }),
    search_prompt: str(),
    user_location: userLocation,
    x_search: plainObject(),
  }, { required: ["id"] }),
  object({
    id: tag("web-fetch"),
    allowed_domains: strings(),
    blocked_domains: strings(),
    max_content_tokens: integer({ min: 1 }),
    max_uses: integer({ min: 1 }),
  }, { required: ["id"] }),
  object({ id: tag("file-parser"), enabled: boolean(), pdf: object({ engine: oneOf(PDF_ENGINES) }) }, { required: ["id"] }),
  object({ id: tag("response-healing"), enabled: boolean() }, { required: ["id"] }),
  object({ id: tag("context-compression"), enabled: boolean(), engine: oneOf(["middle-out"]) }, { required: ["id"] }),
  object({
    id: tag("pareto-router"),
    enabled: boolean(),
    min_coding_score: number({ min: 0, max: 1 }),
    price_source: oneOf(["prompt", "weighted_avg"]),
    max_price: number({ min: 0 }),
  }, { required: ["id"] }),
  object({ id: tag("fusion"), enabled: boolean(), preset: oneOf(FUSION_PRESETS), ...fusionFields() }, { required: ["id"] }),
  object({ id: tag("switchyard-router"), algorithm: oneOf(SWITCHYARD_ALGORITHMS) }, { required: ["id"] }),
]);

const PRICE = /^(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
const price = () =>
  byType([string({ pattern: PRICE, patternText: "must be a non-negative decimal number (USD)" }), number({ min: 0 })], "must be a decimal string (USD)");
const percentiles = () =>
  nullable(
    byType(
      [
        number({ min: 0 }),
        object({
          p50: nullable(number({ min: 0 })),
          p75: nullable(number({ min: 0 })),
          p90: nullable(number({ min: 0 })),
          p99: nullable(number({ min: 0 })),
        }),
      ],
      "must be a number or an object of percentiles (p50, p75, p90, p99)",
    ),
  );
const providerSort = byType(
  [oneOf(PROVIDER_SORTS), object({ by: nullable(oneOf(PROVIDER_SORTS)), partition: nullable(oneOf(["model", "none"])) })],
  `must be one of ${PROVIDER_SORTS.join(", ")} or an object {by, partition}`,
);

/** ProviderPreferences: no additional properties. */
const providerPreferences = closedObject({
  allow_fallbacks: nullableBool(),
  data_collection: nullable(oneOf(["allow", "deny"])),
  enforce_distillable_text: nullableBool(),
  ignore: providerList(),
  only: providerList(),
  order: providerList(),
  max_price: object({ prompt: price(), completion: price(), request: price(), image: price(), audio: price() }),
  preferred_max_latency: percentiles(),
  preferred_min_throughput: percentiles(),
  quantizations: nullable(array(oneOf(QUANTIZATIONS))),
  require_parameters: nullableBool(),
  sort: nullable(providerSort),
  zdr: nullableBool(),
});

const responseFormat = discriminated("type", [
  object({ type: tag("text") }, { required: ["type"] }),
  object({ type: tag("json_object") }, { required: ["type"] }),
  object(
    {
      type: tag("json_schema"),
      json_schema: object(
        { name: string({ min: 1 }), description: str(), schema: plainObject(), strict: nullableBool() },
        { required: ["name"] },
      ),
    },
    { required: ["type", "json_schema"] },
  ),
  object({ type: tag("grammar"), grammar: str() }, { required: ["type", "grammar"] }),
  object({ type: tag("python") }, { required: ["type"] }),
]);

const stopCondition = discriminated("type", [
  object({ type: tag("step_count_is"), step_count: integer({ min: 1 }) }, { required: ["type", "step_count"] }),
  object({ type: tag("max_cost"), max_cost_in_dollars: number({ min: 0 }) }, { required: ["type", "max_cost_in_dollars"] }),
  object({ type: tag("max_tokens_used"), max_tokens: integer({ min: 1 }) }, { required: ["type", "max_tokens"] }),
  object({ type: tag("has_tool_call"), tool_name: string({ min: 1 }) }, { required: ["type", "tool_name"] }),
  object({ type: tag("finish_reason_is"), reason: string({ min: 1 }) }, { required: ["type", "reason"] }),
]);

/**
 * The response cache's longest time to live (docs/operations.md, "Response cache"): a day. `cache.ttl_seconds`
 * 0 switches the cache off for the request (over a preset's).
 */
export const MAX_RESPONSE_CACHE_TTL_SECONDS = 86_400;

const stop = byType([str(), array(str(), { max: 4 })], "must be a string, an array of at most 4 strings, or null");

const imageConfigValue = byType([str(), number(), z.array(z.unknown())], "values must be strings, numbers or arrays");

/** The server tool types of a deployment: `<brand>:<kind>` and the web-search shorthands. */
function serverToolTypes(brand: string): [string, ...string[]] {
  return [...SERVER_TOOL_KINDS.map((k) => `${brand}:${k}`), ...WEB_SEARCH_SHORTHANDS] as unknown as [string, ...string[]];
}

function buildChatRequest(brand: string) {
  const types = serverToolTypes(brand);
  const fusionType = `${brand}:fusion`;
  const plainServerTypes = types.filter((t) => t !== fusionType) as [string, ...string[]];
  const functionName = string({ pattern: FUNCTION_NAME, patternText: FUNCTION_NAME_TEXT });

  const tool = discriminated("type", [
    object(
      {
        type: tag("function"),
        function: object({ name: functionName, description: str(), parameters: plainObject(), strict: nullableBool() }, { required: ["name"] }),
        cache_control: cacheControl(),
      },
      { required: ["type", "function"] },
    ),
    object({ type: z.enum(plainServerTypes), parameters: plainObject(), cache_control: cacheControl() }, { required: ["type"] }),
    object({ type: z.literal(fusionType), parameters: object(fusionFields()), cache_control: cacheControl() }, { required: ["type"] }),
  ]);

  const toolChoice = byType(
    [
      oneOf(["none", "auto", "required"]),
      discriminated("type", [
        object({ type: tag("function"), function: object({ name: functionName }, { required: ["name"] }) }, { required: ["type", "function"] }),
        object({ type: z.enum(types) }, { required: ["type"] }),
      ]),
    ],
    'must be "none", "auto", "required", a named-tool choice or a server-tool choice object',
  );

  return object(
    {
      messages: array(message, { min: 1 }),
      model: str(),
      models: array(str(), { max: MAX_FALLBACK_MODELS }),
      cache_control: cacheControl(),
      cache: object({ ttl_seconds: integer({ min: 0, max: MAX_RESPONSE_CACHE_TTL_SECONDS }) }, { required: ["ttl_seconds"] }),
      debug: object({ echo_upstream_body: boolean() }),
      frequency_penalty: nullable(number(NUMBER_BOUNDS.frequency_penalty)),
      presence_penalty: nullable(number(NUMBER_BOUNDS.presence_penalty)),
      image_config: record(imageConfigValue),
      logit_bias: nullable(record(number())),
      logprobs: nullableBool(),
      top_logprobs: nullable(integer({ min: 0, max: 20 })),
      max_completion_tokens: nullable(integer(INTEGER_BOUNDS.max_completion_tokens)),
      max_tokens: nullable(integer(INTEGER_BOUNDS.max_tokens)),
      metadata: record(string({ max: 512 }), { maxEntries: 16, maxKeyLength: 64 }),
      min_p: nullable(number()),
      modalities: array(oneOf(MODALITIES)),
      parallel_tool_calls: nullableBool(),
      plugins: array(plugin),
      prediction: nullable(object({ type: oneOf(["content"]), content: textContent() }, { required: ["type", "content"] })),
      prompt_cache_key: nullable(str()),
      prompt_cache_options: nullable(object({ mode: oneOf(["explicit"]), ttl: nullable(str()) }, { required: ["mode"] })),
      provider: nullable(providerPreferences),
      reasoning: object({ effort: nullable(oneOf(REASONING_EFFORTS)), summary: nullable(oneOf(REASONING_SUMMARIES)) }),
      reasoning_effort: nullable(oneOf(REASONING_EFFORTS)),
      repetition_penalty: nullable(number()),
      response_format: responseFormat,
      route: nullable(oneOf(["fallback", "sort"])),
      seed: nullable(integer()),
      service_tier: nullable(oneOf(SERVICE_TIERS)),
      session_id: string({ max: MAX_SESSION_ID_CHARS }),
      stop: nullable(stop),
      stop_server_tools_when: array(stopCondition, { min: 1 }),
      stream: boolean(),
      stream_options: nullable(object({ include_usage: boolean() })),
      temperature: nullable(number(NUMBER_BOUNDS.temperature)),
      top_p: nullable(number(NUMBER_BOUNDS.top_p)),
      top_k: nullable(integer({ min: 0 })),
      top_a: nullable(number()),
      tool_choice: toolChoice,
      tools: array(tool),
      trace: object(
        Object.fromEntries(TRACE_STRING_KEYS.map((k) => [k, string({ max: MAX_TRACE_VALUE_CHARS })])) as Record<(typeof TRACE_STRING_KEYS)[number], z.ZodString>,
      ).check(
        z.superRefine((v, ctx) => {
          const keys = Object.keys(v).length;
          if (keys > MAX_TRACE_KEYS) ctx.addIssue({ code: "custom", input: v, message: `must have at most ${MAX_TRACE_KEYS} keys, got ${keys}` });
          else if (JSON.stringify(v).length > MAX_TRACE_JSON_CHARS) {
            ctx.addIssue({ code: "custom", input: v, message: `must be at most ${MAX_TRACE_JSON_CHARS} characters as JSON` });
          }
        }),
      ),
      user: string({ max: MAX_USER_CHARS }),
    },
    { required: ["messages"] },
  ).meta({
    description:
      "An OpenAI-compatible chat-completions request. Unknown top-level fields are accepted; provider rejects unknown properties.",
  });
}

/** The zod schema of a chat request. */
export type ChatRequestSchema = ReturnType<typeof buildChatRequest>;
/** A validated chat request (unknown top-level fields kept). */
export type ChatRequest = z.output<ChatRequestSchema>;

/*
 * The pieces of a validated request, as the schema outputs them: the types the core's canonical request is made of
 * (src/core/chat/model.ts), so the type and the validation cannot drift. Every object is loose (unknown keys pass
 * and are kept), so each of these also admits keys the schema does not name (`reasoning_details`, `cache_control`).
 */
/** One message, discriminated by `role`. */
export type ChatMessage = z.output<typeof message>;
/** One message of the given role. */
export type ChatMessageOf<R extends ChatMessage["role"]> = Extract<ChatMessage, { role: R }>;
/** An assistant message's tool call. */
export type ChatToolCall = z.output<typeof toolCall>;
/** A user or tool message's content part (`type` any string; a `text` part has `text`). */
export type ChatContentPart = z.output<typeof contentPart>;
/** A system or developer message's text part. */
export type ChatTextPart = z.output<typeof textPart>;
/** One entry of `tools`: a function tool or a server tool (`<brand>:<kind>`, the web-search shorthands). */
export type ChatTool = NonNullable<ChatRequest["tools"]>[number];
/**
 * A function tool. The adapters' view of `tools`: the server-tools stage offers server tools as function tools
 * before an adapter sees the request (and the other dialects refuse them), but the type cannot narrow `tools` by
 * `type` alone (a server tool's `type` is any string), so adapters cast to this where they map `tools`.
 */
export type ChatFunctionTool = Extract<ChatTool, { type: "function" }>;
/** `tool_choice`: "none" | "auto" | "required", a named function, or a server tool. */
export type ChatToolChoice = NonNullable<ChatRequest["tool_choice"]>;
/** `response_format`, discriminated by `type`. */
export type ChatResponseFormat = NonNullable<ChatRequest["response_format"]>;
/** `reasoning`: `{effort, summary}` (loose: adapters also read `max_tokens`, `enabled`, `exclude`). */
export type ChatReasoning = NonNullable<ChatRequest["reasoning"]>;

/** Rules that relate two fields. */
function crossFieldRules(body: Record<string, unknown>): void {
  const shorthand = body.reasoning_effort;
  const reasoning = body.reasoning;
  const effort = isPlainObject(reasoning) ? reasoning.effort : undefined;
  if (shorthand != null && effort != null && shorthand !== effort) {
    fail("reasoning_effort", `must not differ from reasoning.effort (${JSON.stringify(shorthand)} vs ${JSON.stringify(effort)})`);
  }
}

const schemas = new Map<string, ChatRequestSchema>();

/**
 * The common request's shape, checked without zod: `true` only for a body the schema accepts (a subset of it),
 * `false` for anything else, which then goes to zod (the one definition, and its messages for a broken rule).
 * Per request zod's parse cost ≈ 3 µs in isolation and ≈ 2.6 % of `portico serve`'s busy time under load
 * (bench/README.md, "The request's common shape without zod"). The subset: `messages` of system, developer,
 * user and assistant messages with string content (null too for an assistant) and an optional string `name`,
 * and no other key; the top-level keys of {@link FAST_KEYS}, with their schema's types and bounds (the same
 * constants: NUMBER_BOUNDS, INTEGER_BOUNDS, MAX_USER_CHARS); any key the
 * schema does not name (passed through, as the schema's loose object does). A key the schema names and the
 * subset does not (tools, provider, plugins, …), or a value the subset does not take, means zod.
 * `test/unit/contract/chat-request-fast-path.test.ts` holds zod's verdict against this one's.
 */
const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const inRange = ({ min, max }: { min: number; max: number }) => (v: unknown) => v === null || (finite(v) && v >= min && v <= max);
const safeIntFrom = ({ min }: { min: number }) => (v: unknown) => v === null || (Number.isSafeInteger(v) && (v as number) >= min);
const FAST_KEYS: Readonly<Record<string, (v: unknown) => boolean>> = {
  messages: fastMessages,
  model: (v) => typeof v === "string",
  stream: (v) => typeof v === "boolean",
  temperature: inRange(NUMBER_BOUNDS.temperature),
  top_p: inRange(NUMBER_BOUNDS.top_p),
  frequency_penalty: inRange(NUMBER_BOUNDS.frequency_penalty),
  presence_penalty: inRange(NUMBER_BOUNDS.presence_penalty),
  max_tokens: safeIntFrom(INTEGER_BOUNDS.max_tokens),
  max_completion_tokens: safeIntFrom(INTEGER_BOUNDS.max_completion_tokens),
  seed: safeIntFrom({ min: Number.MIN_SAFE_INTEGER }),
  user: (v) => typeof v === "string" && v.length <= MAX_USER_CHARS,
  stream_options: (v) => v === null || (isPlainObject(v) && onlyKey(v, "include_usage") && (v.include_usage === undefined || typeof v.include_usage === "boolean")),
};
/** The top-level keys {@link fastAccepts} checks itself (for the test that holds it to the schema's bounds). */
export const FAST_PATH_KEYS: readonly string[] = Object.keys(FAST_KEYS);
const FAST_ROLES = new Set(["system", "developer", "user", "assistant"]);

function onlyKey(o: Record<string, unknown>, key: string): boolean {
  for (const k in o) if (k !== key) return false;
  return true;
}

function fastMessages(v: unknown): boolean {
  if (!Array.isArray(v) || v.length === 0) return false;
  for (let i = 0; i < v.length; i++) {
    const m: unknown = v[i];
    if (!isPlainObject(m) || Object.getPrototypeOf(m) !== Object.prototype) return false;
    let n = 0;
    for (const k in m) {
      n++;
      if (k !== "role" && k !== "content" && k !== "name") return false;
    }
    const role = m.role;
    if (typeof role !== "string" || !FAST_ROLES.has(role)) return false;
    const content = m.content;
    if (typeof content !== "string" && !(content === null && role === "assistant")) return false;
    if (n === 3 ? typeof m.name !== "string" : n !== 2) return false;
  }
  return true;
}

/** The keys the schema names (the rest pass as they are). */
const shapeKeys = new Map<ChatRequestSchema, ReadonlySet<string>>();

export function fastAccepts(schema: ChatRequestSchema, body: Record<string, unknown>): boolean {
  if (Object.getPrototypeOf(body) !== Object.prototype) return false;
  let named = shapeKeys.get(schema);
  if (!named) shapeKeys.set(schema, (named = new Set(Object.keys(schema.shape))));
  let messages = false;
  for (const key in body) {
    if (!named.has(key)) {
      if (key === "__proto__") return false;
      continue;
    }
    const check = FAST_KEYS[key];
    if (check === undefined || !check(body[key])) return false;
    if (key === "messages") messages = true;
  }
  return messages;
}

export const ChatRequest = {
  /** The zod schema for a deployment whose server tool types are prefixed with `brand` (built once per brand). */
  schema(brand: string): ChatRequestSchema {
    let s = schemas.get(brand);
    if (!s) schemas.set(brand, (s = buildChatRequest(brand)));
    return s;
  },
  /**
   * Validates a parsed JSON body into a typed ChatRequest. Throws RuleViolation (field = wire path,
   * e.g. `messages[0].role`; message a sentence naming it) for the first broken rule, including the
   * cross-field rule on reasoning_effort. The result is a copy; callers that must keep the body
   * exactly as sent (key order, unknown fields) keep using the body they validated.
   */
  parse(body: unknown, opts: { brand: string }): ChatRequest {
    if (!isPlainObject(body)) fail("body", "must be a JSON object");
    const parsed = validate(ChatRequest.schema(opts.brand), body);
    crossFieldRules(body);
    return parsed;
  },
  /**
   * {@link ChatRequest.parse} without its copy: throws the same RuleViolation for a broken rule, returns nothing
   * for a valid body. A body of the common shape is checked without zod (fastAccepts); any other goes to zod.
   */
  check(body: unknown, opts: { brand: string }): void {
    if (!isPlainObject(body)) fail("body", "must be a JSON object");
    const schema = ChatRequest.schema(opts.brand);
    if (!fastAccepts(schema, body)) validate(schema, body);
    crossFieldRules(body);
  },
};

/** Throws RuleViolation for the first broken rule of a chat request body. */
export type ChatRequestValidator = (body: unknown) => asserts body is Record<string, unknown>;

/** A validator bound to a brand. */
export function createChatRequestValidator(opts: { brand: string }): ChatRequestValidator {
  ChatRequest.schema(opts.brand);
  return (body: unknown): asserts body is Record<string, unknown> => {
    ChatRequest.check(body, opts);
  };
}
