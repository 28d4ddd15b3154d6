import { describe, expect, it } from "vitest";
import { createChatRequestValidator, type ChatRequestValidator } from "../../../src/contract/requests/chat-request.js";
import { RuleViolation } from "../../../src/contract/requests/kit.js";

const validate: ChatRequestValidator = createChatRequestValidator({ brand: "service" });
const base = { messages: [{ role: "user", content: "Hello" }] };

function violation(body: unknown): RuleViolation | undefined {
  try {
    validate(body);
    return undefined;
  } catch (err) {
    if (err instanceof RuleViolation) return err;
    throw err;
  }
}

const plugin = (p: Record<string, unknown>) => ({ plugins: [p] });
const provider = (p: Record<string, unknown>) => ({ provider: p });
const fnTool = (name: string) => ({ tools: [{ type: "function", function: { name } }] });

/** [case, fields merged into a valid body, field named by the 400]. */
const INVALID: Array<[string, Record<string, unknown>, string]> = [
  // messages
  ["messages missing", { messages: undefined }, "messages"],
  ["messages empty", { messages: [] }, "messages"],
  ["messages not an array", { messages: "hi" }, "messages"],
  ["message not an object", { messages: ["hi"] }, "messages[0]"],
  ["message without role", { messages: [{ content: "x" }] }, "messages[0].role"],
  ["unknown role", { messages: [{ role: "robot", content: "x" }] }, "messages[0].role"],
  ["user without content", { messages: [{ role: "user" }] }, "messages[0].content"],
  ["system content a number", { messages: [{ role: "system", content: 1 }] }, "messages[0].content"],
  ["system content image part", { messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, "messages[0].content[0].type"],
  ["text part without text", { messages: [{ role: "user", content: [{ type: "text" }] }] }, "messages[0].content[0].text"],
  ["tool without tool_call_id", { messages: [{ role: "tool", content: "ok" }] }, "messages[0].tool_call_id"],
  // numeric ranges
  ["frequency_penalty > 2", { frequency_penalty: 2.5 }, "frequency_penalty"],
  ["frequency_penalty < -2", { frequency_penalty: -2.01 }, "frequency_penalty"],
  ["presence_penalty > 2", { presence_penalty: 3 }, "presence_penalty"],
  ["presence_penalty string", { presence_penalty: "1" }, "presence_penalty"],
  ["temperature > 2", { temperature: 2.1 }, "temperature"],
  ["temperature < 0", { temperature: -0.1 }, "temperature"],
  ["temperature string", { temperature: "0.7" }, "temperature"],
  ["top_p > 1", { top_p: 1.5 }, "top_p"],
  ["top_p < 0", { top_p: -1 }, "top_p"],
  ["top_logprobs > 20", { top_logprobs: 21 }, "top_logprobs"],
  ["top_logprobs < 0", { top_logprobs: -1 }, "top_logprobs"],
  ["top_logprobs fractional", { top_logprobs: 1.5 }, "top_logprobs"],
  // integers
  ["seed fractional", { seed: 1.5 }, "seed"],
  ["seed string", { seed: "1" }, "seed"],
  ["max_tokens fractional", { max_tokens: 10.5 }, "max_tokens"],
  ["max_tokens zero", { max_tokens: 0 }, "max_tokens"],
  ["max_completion_tokens fractional", { max_completion_tokens: 1.1 }, "max_completion_tokens"],
  ["top_k fractional", { top_k: 2.5 }, "top_k"],
  // simple types
  ["model not a string", { model: 1 }, "model"],
  ["models not strings", { models: ["a", 2] }, "models[1]"],
  ["logprobs not a boolean", { logprobs: "yes" }, "logprobs"],
  ["parallel_tool_calls not a boolean", { parallel_tool_calls: 1 }, "parallel_tool_calls"],
  ["logit_bias value not a number", { logit_bias: { "50256": "x" } }, "logit_bias.50256"],
  ["min_p not a number", { min_p: "0.1" }, "min_p"],
  ["top_a not a number", { top_a: [] }, "top_a"],
  ["repetition_penalty not a number", { repetition_penalty: true }, "repetition_penalty"],
  ["stream not a boolean", { stream: "false" }, "stream"],
  ["user not a string", { user: 5 }, "user"],
  ["debug.echo_upstream_body not a boolean", { debug: { echo_upstream_body: 1 } }, "debug.echo_upstream_body"],
  ["stream_options.include_usage not a boolean", { stream_options: { include_usage: "y" } }, "stream_options.include_usage"],
  ["image_config value an object", { image_config: { size: { w: 1 } } }, "image_config.size"],
  ["trace known key not a string", { trace: { trace_id: 5 } }, "trace.trace_id"],
  ["prompt_cache_key not a string", { prompt_cache_key: 1 }, "prompt_cache_key"],
  // metadata
  ["metadata 17 pairs", { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
  ["metadata key 65 chars", { metadata: { ["k".repeat(65)]: "v" } }, "metadata"],
  ["metadata value 513 chars", { metadata: { k: "v".repeat(513) } }, "metadata.k"],
  ["metadata value not a string", { metadata: { k: 1 } }, "metadata.k"],
  // stop
  ["stop 5 items", { stop: ["a", "b", "c", "d", "e"] }, "stop"],
  ["stop number", { stop: 1 }, "stop"],
  ["stop array of numbers", { stop: [1] }, "stop[0]"],
  // session_id
  ["session_id 257 chars", { session_id: "s".repeat(257) }, "session_id"],
  // tools
  ["function name 65 chars", fnTool("f".repeat(65)), "tools[0].function.name"],
  ["function name with space", fnTool("get weather"), "tools[0].function.name"],
  ["function name with dot", fnTool("a.b"), "tools[0].function.name"],
  ["function name empty", fnTool(""), "tools[0].function.name"],
  ["function without name", { tools: [{ type: "function", function: {} }] }, "tools[0].function.name"],
  ["function tool without function", { tools: [{ type: "function" }] }, "tools[0].function"],
  ["function parameters not an object", { tools: [{ type: "function", function: { name: "f", parameters: [] } }] }, "tools[0].function.parameters"],
  ["function strict not a boolean", { tools: [{ type: "function", function: { name: "f", strict: "yes" } }] }, "tools[0].function.strict"],
  ["tool without type", { tools: [{ function: { name: "f" } }] }, "tools[0].type"],
  ["unknown tool type", { tools: [{ type: "retrieval" }] }, "tools[0].type"],
  ["foreign brand server tool", { tools: [{ type: "openrouter:web_search" }] }, "tools[0].type"],
  ["server tool parameters not an object", { tools: [{ type: "service:datetime", parameters: "UTC" }] }, "tools[0].parameters"],
  ["fusion server tool 9 analysis models", { tools: [{ type: "service:fusion", parameters: { analysis_models: Array(9).fill("m") } }] }, "tools[0].parameters.analysis_models"],
  ["tool cache_control bad type", { tools: [{ type: "function", function: { name: "f" }, cache_control: { type: "persistent" } }] }, "tools[0].cache_control.type"],
  // tool_choice
  ["tool_choice unknown string", { tool_choice: "any" }, "tool_choice"],
  ["tool_choice number", { tool_choice: 1 }, "tool_choice"],
  ["tool_choice object without type", { tool_choice: { function: { name: "f" } } }, "tool_choice.type"],
  ["tool_choice function without name", { tool_choice: { type: "function", function: {} } }, "tool_choice.function.name"],
  ["tool_choice unknown server tool", { tool_choice: { type: "service:teleport" } }, "tool_choice.type"],
  // enumerations
  ["service_tier unknown", { service_tier: "turbo" }, "service_tier"],
  ["modalities unknown", { modalities: ["text", "video"] }, "modalities[1]"],
  ["reasoning.effort unknown", { reasoning: { effort: "extreme" } }, "reasoning.effort"],
  ["reasoning.summary unknown", { reasoning: { summary: "brief" } }, "reasoning.summary"],
  ["reasoning_effort unknown", { reasoning_effort: "extreme" }, "reasoning_effort"],
  ["reasoning_effort differs", { reasoning_effort: "high", reasoning: { effort: "low" } }, "reasoning_effort"],
  ["cache_control without type", { cache_control: { ttl: "5m" } }, "cache_control.type"],
  ["cache_control type unknown", { cache_control: { type: "persistent" } }, "cache_control.type"],
  ["cache_control ttl unknown", { cache_control: { type: "ephemeral", ttl: "2h" } }, "cache_control.ttl"],
  ["response_format without type", { response_format: {} }, "response_format.type"],
  ["response_format type unknown", { response_format: { type: "yaml" } }, "response_format.type"],
  ["json_schema without json_schema", { response_format: { type: "json_schema" } }, "response_format.json_schema"],
  ["json_schema without name", { response_format: { type: "json_schema", json_schema: { schema: {} } } }, "response_format.json_schema.name"],
  ["grammar without grammar", { response_format: { type: "grammar" } }, "response_format.grammar"],
  ["route unknown", { route: "random" }, "route"],
  ["prompt_cache_options without mode", { prompt_cache_options: { ttl: "5m" } }, "prompt_cache_options.mode"],
  ["prompt_cache_options mode unknown", { prompt_cache_options: { mode: "implicit" } }, "prompt_cache_options.mode"],
  ["prediction type unknown", { prediction: { type: "diff", content: "x" } }, "prediction.type"],
  ["prediction without content", { prediction: { type: "content" } }, "prediction.content"],
  // stop_server_tools_when
  ["stop_server_tools_when empty", { stop_server_tools_when: [] }, "stop_server_tools_when"],
  ["stop condition unknown type", { stop_server_tools_when: [{ type: "never" }] }, "stop_server_tools_when[0].type"],
  ["step_count_is without step_count", { stop_server_tools_when: [{ type: "step_count_is" }] }, "stop_server_tools_when[0].step_count"],
  ["step_count fractional", { stop_server_tools_when: [{ type: "step_count_is", step_count: 1.5 }] }, "stop_server_tools_when[0].step_count"],
  ["max_cost negative", { stop_server_tools_when: [{ type: "max_cost", max_cost_in_dollars: -1 }] }, "stop_server_tools_when[0].max_cost_in_dollars"],
  // plugins
  ["plugin without id", plugin({ enabled: true }), "plugins[0].id"],
  ["plugin id unknown", plugin({ id: "telepathy" }), "plugins[0].id"],
  ["auto-router cost_quality_tradeoff 11", plugin({ id: "auto-router", cost_quality_tradeoff: 11 }), "plugins[0].cost_quality_tradeoff"],
  ["auto-router cost_quality_tradeoff -1", plugin({ id: "auto-router", cost_quality_tradeoff: -1 }), "plugins[0].cost_quality_tradeoff"],
  ["auto-router cost_quality_tradeoff fractional", plugin({ id: "auto-router", cost_quality_tradeoff: 7.5 }), "plugins[0].cost_quality_tradeoff"],
  ["auto-router allowed_models not strings", plugin({ id: "auto-router", allowed_models: [1] }), "plugins[0].allowed_models[0]"],
  ["auto-beta-router cost_quality_tradeoff 11", plugin({ id: "auto-beta-router", cost_quality_tradeoff: 11 }), "plugins[0].cost_quality_tradeoff"],
  ["auto-router cost_tier unknown", plugin({ id: "auto-router", cost_tier: "cheap" }), "plugins[0].cost_tier"],
  ["enabled not a boolean", plugin({ id: "response-healing", enabled: "yes" }), "plugins[0].enabled"],
  ["web engine unknown", plugin({ id: "web", engine: "bing" }), "plugins[0].engine"],
  ["web max_results fractional", plugin({ id: "web", max_results: 2.5 }), "plugins[0].max_results"],
  ["web max_uses zero", plugin({ id: "web", max_uses: 0 }), "plugins[0].max_uses"],
  ["web include_domains not an array", plugin({ id: "web", include_domains: "a.com" }), "plugins[0].include_domains"],
  ["web user_location without type", plugin({ id: "web", user_location: { city: "Paris" } }), "plugins[0].user_location.type"],
  ["web user_location type unknown", plugin({ id: "web", user_location: { type: "exact" } }), "plugins[0].user_location.type"],
  ["web-fetch max_content_tokens fractional", plugin({ id: "web-fetch", max_content_tokens: 1.5 }), "plugins[0].max_content_tokens"],
  ["web-fetch max_uses string", plugin({ id: "web-fetch", max_uses: "3" }), "plugins[0].max_uses"],
  ["file-parser pdf engine unknown", plugin({ id: "file-parser", pdf: { engine: "ocr9000" } }), "plugins[0].pdf.engine"],
  ["context-compression engine unknown", plugin({ id: "context-compression", engine: "head" }), "plugins[0].engine"],
  ["pareto-router min_coding_score > 1", plugin({ id: "pareto-router", min_coding_score: 1.2 }), "plugins[0].min_coding_score"],
  ["pareto-router min_coding_score < 0", plugin({ id: "pareto-router", min_coding_score: -0.1 }), "plugins[0].min_coding_score"],
  ["pareto-router price_source unknown", plugin({ id: "pareto-router", price_source: "median" }), "plugins[0].price_source"],
  ["fusion max_tool_calls 0", plugin({ id: "fusion", max_tool_calls: 0 }), "plugins[0].max_tool_calls"],
  ["fusion max_tool_calls 17", plugin({ id: "fusion", max_tool_calls: 17 }), "plugins[0].max_tool_calls"],
  ["fusion max_tool_calls fractional", plugin({ id: "fusion", max_tool_calls: 2.5 }), "plugins[0].max_tool_calls"],
  ["fusion analysis_models empty", plugin({ id: "fusion", analysis_models: [] }), "plugins[0].analysis_models"],
  ["fusion analysis_models 9", plugin({ id: "fusion", analysis_models: Array(9).fill("m") }), "plugins[0].analysis_models"],
  ["fusion tools 9", plugin({ id: "fusion", tools: Array(9).fill({ type: "service:web_search" }) }), "plugins[0].tools"],
  ["fusion tool without type", plugin({ id: "fusion", tools: [{ parameters: {} }] }), "plugins[0].tools[0].type"],
  ["fusion tool parameters not an object", plugin({ id: "fusion", tools: [{ type: "x", parameters: 1 }] }), "plugins[0].tools[0].parameters"],
  ["fusion preset unknown", plugin({ id: "fusion", preset: "general-best" }), "plugins[0].preset"],
  ["switchyard-router algorithm unknown", plugin({ id: "switchyard-router", algorithm: "dice" }), "plugins[0].algorithm"],
  ["plugins not an array", { plugins: { id: "web" } }, "plugins"],
  // provider
  ["provider unknown property", provider({ favourite: "OpenAI" }), "provider.favourite"],
  ["provider camelCase property", provider({ allowFallbacks: true }), "provider.allowFallbacks"],
  ["provider not an object", { provider: "OpenAI" }, "provider"],
  ["provider.allow_fallbacks not a boolean", provider({ allow_fallbacks: "no" }), "provider.allow_fallbacks"],
  ["provider.data_collection unknown", provider({ data_collection: "maybe" }), "provider.data_collection"],
  ["provider.only not an array", provider({ only: "OpenAI" }), "provider.only"],
  ["provider.order item not a string", provider({ order: [1] }), "provider.order[0]"],
  ["provider.ignore item not a string", provider({ ignore: [null] }), "provider.ignore[0]"],
  ["provider.quantizations unknown", provider({ quantizations: ["fp3"] }), "provider.quantizations[0]"],
  ["provider.sort unknown", provider({ sort: "cheapest" }), "provider.sort"],
  ["provider.sort.by unknown", provider({ sort: { by: "vibes" } }), "provider.sort.by"],
  ["provider.sort.partition unknown", provider({ sort: { partition: "all" } }), "provider.sort.partition"],
  ["provider.max_price.prompt not a price", provider({ max_price: { prompt: "cheap" } }), "provider.max_price.prompt"],
  ["provider.max_price.completion negative", provider({ max_price: { completion: -1 } }), "provider.max_price.completion"],
  ["provider.preferred_max_latency string", provider({ preferred_max_latency: "fast" }), "provider.preferred_max_latency"],
  ["provider.preferred_min_throughput.p90 string", provider({ preferred_min_throughput: { p90: "x" } }), "provider.preferred_min_throughput.p90"],
  ["provider.zdr not a boolean", provider({ zdr: 1 }), "provider.zdr"],
  ["provider.require_parameters not a boolean", provider({ require_parameters: "true" }), "provider.require_parameters"],
  ["provider.enforce_distillable_text not a boolean", provider({ enforce_distillable_text: 0 }), "provider.enforce_distillable_text"],
];

/** Bodies (merged into a valid base) that must pass. */
const VALID: Array<[string, Record<string, unknown>]> = [
  ["minimal", {}],
  ["every role", { messages: [
    { role: "system", content: "s" },
    { role: "developer", content: [{ type: "text", text: "d" }] },
    { role: "user", content: [{ type: "text", text: "u" }, { type: "image_url", image_url: { url: "https://x/y.png" } }] },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] },
    { role: "tool", content: "42", tool_call_id: "c1" },
  ] }],
  ["boundaries", { temperature: 2, top_p: 0, frequency_penalty: -2, presence_penalty: 2, top_logprobs: 20, seed: -3 }],
  ["nulls", { temperature: null, top_p: null, stop: null, seed: null, provider: null, logit_bias: null, service_tier: null, route: null, prediction: null }],
  ["integer-valued float", { seed: 1.0, max_tokens: 16 }],
  ["stop string", { stop: "\n" }],
  ["stop 4 items", { stop: ["a", "b", "c", "d"] }],
  ["metadata 16 pairs of max size", { metadata: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`${i}`.padEnd(64, "k"), "v".repeat(512)])) }],
  ["session_id 256 chars", { session_id: "s".repeat(256) }],
  ["function name 64 chars", fnTool("a".repeat(40) + "B-_9".repeat(6))],
  ["server tools", { tools: [{ type: "service:web_search", parameters: { max_results: 3 } }, { type: "web_search_preview" }, { type: "service:fusion", parameters: { analysis_models: ["a"], max_tool_calls: 16 } }] }],
  ["tool_choice forms", { tool_choice: { type: "function", function: { name: "f" } } }],
  ["tool_choice server", { tool_choice: { type: "service:web_search" } }],
  ["tool_choice string", { tool_choice: "required" }],
  ["reasoning agrees", { reasoning: { effort: "high", summary: "auto" }, reasoning_effort: "high" }],
  ["reasoning null effort", { reasoning: { effort: null }, reasoning_effort: "low" }],
  ["response formats", { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" }, strict: true } } }],
  ["grammar", { response_format: { type: "grammar", grammar: "root ::= x" } }],
  ["every plugin", { plugins: [
    { id: "auto-router", enabled: true, allowed_models: ["anthropic/*"], cost_quality_tradeoff: 0 },
    { id: "auto-beta-router", cost_quality_tradeoff: 10 },
    { id: "moderation" },
    { id: "web", engine: "exa", max_results: 5, user_location: { type: "approximate", city: "Paris", country: null } },
    { id: "web-fetch", allowed_domains: ["a.com"], max_content_tokens: 1000, max_uses: 2 },
    { id: "file-parser", pdf: { engine: "mistral-ocr" } },
    { id: "response-healing", enabled: false },
    { id: "context-compression", engine: "middle-out" },
    { id: "pareto-router", min_coding_score: 0.66, price_source: "weighted_avg" },
    { id: "fusion", analysis_models: Array(8).fill("m"), preset: "general-fast", max_tool_calls: 1, tools: [] },
    { id: "switchyard-router", algorithm: "stage" },
  ] }],
  ["full provider", { provider: {
    allow_fallbacks: false, data_collection: "deny", enforce_distillable_text: null, ignore: null, only: ["OpenAI"],
    order: ["Anthropic", "OpenAI"], max_price: { prompt: "1.5", completion: 2, request: "0", image: ".5", audio: "1e-3" },
    preferred_max_latency: 1.5, preferred_min_throughput: { p50: 10, p99: null }, quantizations: ["fp8", "bf16"],
    require_parameters: true, sort: { by: "price", partition: "none" }, zdr: true,
  } }],
  ["stop conditions", { stop_server_tools_when: [
    { type: "step_count_is", step_count: 3 }, { type: "max_cost", max_cost_in_dollars: 0.5 },
    { type: "max_tokens_used", max_tokens: 100 }, { type: "has_tool_call", tool_name: "f" }, { type: "finish_reason_is", reason: "stop" },
  ] }],
  ["unknown top-level fields ignored", { frobnicate: { deeply: [1, 2] }, id: "x", version: 7, workspace_id: "other" }],
  ["service_tier fast alias", { service_tier: "fast" }],
  ["misc", { modalities: ["text", "image"], cache_control: { type: "ephemeral", ttl: "1h" }, image_config: { size: "1024x1024", n: 2, styles: ["a"] }, trace: { trace_id: "t", custom: { any: 1 } }, debug: { echo_upstream_body: true }, stream_options: { include_usage: true }, prompt_cache_options: { mode: "explicit", ttl: null }, prediction: { type: "content", content: [{ type: "text", text: "x" }] } }],
];

describe("chat request rules", () => {
  it.each(INVALID)("rejects %s", (_name, patch, field) => {
    const v = violation({ ...base, ...patch });
    expect(v, "expected a violation").toBeInstanceOf(RuleViolation);
    expect(v!.field).toBe(field);
    expect(v!.message.startsWith(field)).toBe(true);
  });

  it.each(VALID)("accepts %s", (_name, patch) => {
    expect(violation({ ...base, ...patch })).toBeUndefined();
  });

  it.each([[null], [[]], ["text"], [1]])("rejects a body that is not an object (%j)", (body) => {
    expect(violation(body)?.field).toBe("body");
  });

  it("uses the configured brand for server tool types", () => {
    const other: ChatRequestValidator = createChatRequestValidator({ brand: "acme" });
    expect(() => other({ ...base, tools: [{ type: "acme:web_search" }] })).not.toThrow();
    expect(() => other({ ...base, tools: [{ type: "service:web_search" }] })).toThrow(RuleViolation);
  });

  it("gives messages that name the field and the limit", () => {
    expect(violation({ ...base, temperature: 3 })?.message).toBe("temperature must be a number between 0 and 2, got 3");
    expect(violation({ ...base, seed: 1.5 })?.message).toBe("seed must be an integer, got 1.5");
    expect(violation({ ...base, messages: [] })?.message).toBe("messages must contain at least 1 item");
  });
});
