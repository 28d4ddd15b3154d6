/**
 * Every validation rule of a chat-completions request used to create a preset, as declarative tables
 * over the JSON body (wire names, values as sent). Built from the API description's ChatRequest,
 * plugins and ProviderPreferences tables, with the "not shown" sub-shapes filled from the API fact
 * sheet §1.8. Unknown top-level fields are ignored; ProviderPreferences rejects unknown properties.
 *
 * Decisions (see docs/presets.md):
 * - `reasoning_effort` and `reasoning.effort` must be equal when both are given and non-null.
 * - `service_tier` also accepts "fast", the documented alias of "priority".
 * - Server tool types use the configured brand word as prefix (`service:web_search`).
 */
import {
  anything,
  array,
  boolean,
  byType,
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
  type Check,
} from "./json-rules.js";

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
export const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const str = string();
const strings = array(str);
const nullableBool = nullable(boolean);
const plainObject: Check = object({});

const cacheControl = object({ type: oneOf(["ephemeral"]), ttl: oneOf(["5m", "1h"]) }, { required: ["type"] });

const textPart = object(
  { type: oneOf(["text"]), text: str, cache_control: cacheControl, prompt_cache_breakpoint: anything },
  { required: ["type", "text"] },
);
const textContent = byType(
  { string: str, array: array(textPart) },
  "must be a string or an array of text parts",
);
/** User and tool content: a string, or parts whose `type` is a string (text parts need `text`). */
const contentPart: Check = (value, path) => {
  object({ type: str }, { required: ["type"] })(value, path);
  if ((value as Record<string, unknown>).type === "text") textPart(value, path);
};
const richContent = byType({ string: str, array: array(contentPart) }, "must be a string or an array of content parts");

const toolCall = object(
  {
    id: str,
    type: oneOf(["function"]),
    function: object({ name: str, arguments: str }, { required: ["name"] }),
  },
  { required: ["function"] },
);

const instructionMessage = object({ content: textContent, name: str }, { required: ["content"] });
const message = discriminated("role", {
  system: instructionMessage,
  developer: instructionMessage,
  user: object({ content: richContent, name: str }, { required: ["content"] }),
  assistant: object({ content: nullable(richContent), name: str, tool_calls: array(toolCall), refusal: nullable(str), reasoning: nullable(str) }),
  tool: object({ content: richContent, tool_call_id: string({ min: 1 }) }, { required: ["content", "tool_call_id"] }),
});

const modelPatterns = array(string({ max: 1024 }), { max: 1024 });
const routerFields = {
  enabled: boolean,
  allowed_models: modelPatterns,
  excluded_models: modelPatterns,
  cost_quality_tradeoff: integer({ min: 0, max: 10 }),
  cost_tier: oneOf(COST_TIERS),
};
const fusionTool = object({ type: string({ min: 1 }), parameters: plainObject }, { required: ["type"] });
const fusionFields = {
  analysis_models: array(str, { min: 1, max: 8 }),
  model: str,
  max_tool_calls: integer({ min: 1, max: 16 }),
  tools: array(fusionTool, { max: 8 }),
};
const userLocation = nullable(
  object(
    { type: oneOf(["approximate"]), city: nullable(str), country: nullable(str), region: nullable(str), timezone: nullable(str) },
    { required: ["type"] },
  ),
);

/** plugins[] variants, by id. */
export const PLUGIN_RULES: Readonly<Record<string, Check>> = {
  "auto-router": object({ ...routerFields, pin_model: boolean }),
  "auto-beta-router": object(routerFields),
  moderation: plainObject,
  web: object({
    enabled: boolean,
    engine: oneOf(WEB_ENGINES),
    mode: str,
    exclude_domains: strings,
    include_domains: strings,
    max_results: integer({ min: 1 }),
    max_uses: integer({ min: 1 }),
    search_prompt: str,
    user_location: userLocation,
    x_search: plainObject,
  }),
  "web-fetch": object({
    allowed_domains: strings,
    blocked_domains: strings,
    max_content_tokens: integer({ min: 1 }),
    max_uses: integer({ min: 1 }),
  }),
  "file-parser": object({ enabled: boolean, pdf: object({ engine: oneOf(PDF_ENGINES) }) }),
  "response-healing": object({ enabled: boolean }),
  "context-compression": object({ enabled: boolean, engine: oneOf(["middle-out"]) }),
  "pareto-router": object({
    enabled: boolean,
    min_coding_score: number({ min: 0, max: 1 }),
    price_source: oneOf(["prompt", "weighted_avg"]),
    max_price: number({ min: 0 }),
  }),
  fusion: object({ enabled: boolean, preset: oneOf(FUSION_PRESETS), ...fusionFields }),
  "switchyard-router": object({ algorithm: oneOf(SWITCHYARD_ALGORITHMS) }),
};

const PRICE = /^(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
const price = byType(
  { string: string({ pattern: PRICE, patternText: "must be a non-negative decimal number (USD)" }), number: number({ min: 0 }) },
  "must be a decimal string (USD)",
);
const percentiles = byType(
  {
    number: number({ min: 0 }),
    object: object({
      p50: nullable(number({ min: 0 })),
      p75: nullable(number({ min: 0 })),
      p90: nullable(number({ min: 0 })),
      p99: nullable(number({ min: 0 })),
    }),
  },
  "must be a number or an object of percentiles (p50, p75, p90, p99)",
);
const providerSort = byType(
  {
    string: oneOf(PROVIDER_SORTS),
    object: object({ by: nullable(oneOf(PROVIDER_SORTS)), partition: nullable(oneOf(["model", "none"])) }),
  },
  `must be one of ${PROVIDER_SORTS.join(", ")} or an object {by, partition}`,
);

/** ProviderPreferences: no additional properties. */
export const PROVIDER_RULES: Readonly<Record<string, Check>> = {
  allow_fallbacks: nullableBool,
  data_collection: nullable(oneOf(["allow", "deny"])),
  enforce_distillable_text: nullableBool,
  ignore: nullable(strings),
  only: nullable(strings),
  order: nullable(strings),
  max_price: object({ prompt: price, completion: price, request: price, image: price, audio: price }),
  preferred_max_latency: nullable(percentiles),
  preferred_min_throughput: nullable(percentiles),
  quantizations: nullable(array(oneOf(QUANTIZATIONS))),
  require_parameters: nullableBool,
  sort: nullable(providerSort),
  zdr: nullableBool,
};

const responseFormat = discriminated("type", {
  text: plainObject,
  json_object: plainObject,
  json_schema: object(
    {
      json_schema: object(
        { name: string({ min: 1 }), description: str, schema: plainObject, strict: nullableBool },
        { required: ["name"] },
      ),
    },
    { required: ["json_schema"] },
  ),
  grammar: object({ grammar: str }, { required: ["grammar"] }),
  python: plainObject,
});

const stopCondition = discriminated("type", {
  step_count_is: object({ step_count: integer({ min: 1 }) }, { required: ["step_count"] }),
  max_cost: object({ max_cost_in_dollars: number({ min: 0 }) }, { required: ["max_cost_in_dollars"] }),
  max_tokens_used: object({ max_tokens: integer({ min: 1 }) }, { required: ["max_tokens"] }),
  has_tool_call: object({ tool_name: string({ min: 1 }) }, { required: ["tool_name"] }),
  finish_reason_is: object({ reason: string({ min: 1 }) }, { required: ["reason"] }),
});

const stop = byType(
  { string: str, array: array(str, { max: 4 }) },
  "must be a string, an array of at most 4 strings, or null",
);

const imageConfigValue = byType(
  { string: str, number: number(), array: anything },
  "values must be strings, numbers or arrays",
);

export interface ChatRequestRuleOptions {
  /** The brand word that prefixes server tool types (`<brand>:web_search`). */
  brand: string;
}

/** The rule table for the top-level fields of a chat request, in the order they are checked. */
export function chatRequestRules(opts: ChatRequestRuleOptions): Readonly<Record<string, Check>> {
  const serverToolTypes = [...SERVER_TOOL_KINDS.map((k) => `${opts.brand}:${k}`), ...WEB_SEARCH_SHORTHANDS];
  const serverTools: Record<string, Check> = {};
  for (const type of serverToolTypes) serverTools[type] = object({ parameters: plainObject, cache_control: cacheControl });
  serverTools[`${opts.brand}:fusion`] = object({ parameters: object(fusionFields), cache_control: cacheControl });

  const tool = discriminated("type", {
    function: object(
      {
        function: object(
          {
            name: string({ pattern: FUNCTION_NAME, patternText: "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -" }),
            description: str,
            parameters: plainObject,
            strict: nullableBool,
          },
          { required: ["name"] },
        ),
        cache_control: cacheControl,
      },
      { required: ["function"] },
    ),
    ...serverTools,
  });

  const serverChoice = oneOf(serverToolTypes);
  const toolChoice = byType(
    {
      string: oneOf(["none", "auto", "required"]),
      object: (value, path) => {
        const v = value as Record<string, unknown>;
        if (v.type === undefined) fail(`${path}.type`, "is required");
        if (v.type === "function") {
          object({ function: object({ name: string({ pattern: FUNCTION_NAME, patternText: "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -" }) }, { required: ["name"] }) }, { required: ["function"] })(value, path);
        } else {
          serverChoice(v.type, `${path}.type`);
        }
      },
    },
    'must be "none", "auto", "required", a named-tool choice or a server-tool choice object',
  );

  return {
    messages: array(message, { min: 1 }),
    model: str,
    models: strings,
    cache_control: cacheControl,
    debug: object({ echo_upstream_body: boolean }),
    frequency_penalty: nullable(number({ min: -2, max: 2 })),
    presence_penalty: nullable(number({ min: -2, max: 2 })),
    image_config: record(imageConfigValue),
    logit_bias: nullable(record(number())),
    logprobs: nullableBool,
    top_logprobs: nullable(integer({ min: 0, max: 20 })),
    max_completion_tokens: nullable(integer({ min: 1 })),
    max_tokens: nullable(integer({ min: 1 })),
    metadata: record(string({ max: 512 }), { maxEntries: 16, maxKeyLength: 64 }),
    min_p: nullable(number()),
    modalities: array(oneOf(MODALITIES)),
    parallel_tool_calls: nullableBool,
    plugins: array(discriminated("id", PLUGIN_RULES)),
    prediction: nullable(object({ type: oneOf(["content"]), content: textContent }, { required: ["type", "content"] })),
    prompt_cache_key: nullable(str),
    prompt_cache_options: nullable(object({ mode: oneOf(["explicit"]), ttl: nullable(str) }, { required: ["mode"] })),
    provider: nullable(object(PROVIDER_RULES, { closed: true })),
    reasoning: object({ effort: nullable(oneOf(REASONING_EFFORTS)), summary: nullable(oneOf(REASONING_SUMMARIES)) }),
    reasoning_effort: nullable(oneOf(REASONING_EFFORTS)),
    repetition_penalty: nullable(number()),
    response_format: responseFormat,
    route: nullable(oneOf(["fallback", "sort"])),
    seed: nullable(integer()),
    service_tier: nullable(oneOf(SERVICE_TIERS)),
    session_id: string({ max: 256 }),
    stop: nullable(stop),
    stop_server_tools_when: array(stopCondition, { min: 1 }),
    stream: boolean,
    stream_options: nullable(object({ include_usage: boolean })),
    temperature: nullable(number({ min: 0, max: 2 })),
    top_p: nullable(number({ min: 0, max: 1 })),
    top_k: nullable(integer({ min: 0 })),
    top_a: nullable(number()),
    tool_choice: toolChoice,
    tools: array(tool),
    trace: object(Object.fromEntries(TRACE_STRING_KEYS.map((k) => [k, str]))),
    user: str,
  };
}

/** Rules that relate two fields. */
function crossFieldRules(body: Record<string, unknown>): void {
  const shorthand = body.reasoning_effort;
  const reasoning = body.reasoning;
  const effort = isPlainObject(reasoning) ? reasoning.effort : undefined;
  if (shorthand != null && effort != null && shorthand !== effort) {
    fail("reasoning_effort", `must not differ from reasoning.effort (${JSON.stringify(shorthand)} vs ${JSON.stringify(effort)})`);
  }
}

/** Throws RuleViolation for the first broken rule of a chat request body. */
export type ChatRequestValidator = (body: unknown) => asserts body is Record<string, unknown>;

/** Builds the validator once (the rule tables are compiled into closures). */
export function createChatRequestValidator(opts: ChatRequestRuleOptions): ChatRequestValidator {
  const rules = object(chatRequestRules(opts), { required: ["messages"] });
  return (body: unknown): asserts body is Record<string, unknown> => {
    if (!isPlainObject(body)) fail("body", "must be a JSON object");
    rules(body, "");
    crossFieldRules(body);
  };
}
