/**
 * The ChatRequest is defined once: the zod definition (src/contract/requests/chat-request.ts) is the source
 * of truth, and the typed proto message `portico.presets.v1.ChatRequest` (presets' `chat_request`) must carry
 * the same fields at every level. This walks both — the proto descriptor and the JSON Schema derived from the
 * zod definition — and fails on any field present in one but not the other, so they cannot drift.
 *
 * Where the proto holds a sub-object as google.protobuf.Struct/Value/ListValue (free-form JSON), the walk
 * stops on that branch; a discriminated union (plugins, messages, tools) is compared as the union of its
 * variants' fields, which is how the proto message holds it.
 *
 * Beyond the names, each field's rules must agree:
 * - type: a proto string is a zod string, bool a boolean, double/float a number, an integer kind an integer
 *   (whose bounds, where zod states them, fit the proto type); repeated is an array, a map an object of the
 *   map's value type, on both sides.
 * - enumerations: proto holds a string whose public values are listed in its comment ("auto", "default", …);
 *   a zod enum (or the literals of a discriminator's variants) must list exactly the comment's quoted values.
 * - bounds: each bound zod states (minimum/maximum, lengths, item counts) must be written in the field's proto
 *   comment, and a numeric field's comment ("from 0 to 2", "at least 1", "between -2 and 2") must state no
 *   bound zod does not check. zod's default integer bounds (±2^53-1, no bound of the request's) are no bound;
 *   an int32 proto field under them is the typed form's documented narrowing (it cannot carry JSON's nulls
 *   either), not a drift.
 * The comments are read from the generated code (src/gen), which carries each field's proto comment.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { ChatRequestSchema } from "../../../src/gen/portico/presets/v1/presets_service_pb.js";
import { ChatRequest } from "../../../src/contract/requests/chat-request.js";
import { requestJsonSchema } from "../../../src/contract/requests/kit.js";

type Json = Record<string, unknown>;

/** The object properties a JSON Schema node allows (merging anyOf/oneOf branches and array items). */
function propertiesOf(node: unknown, defs: Json): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  const visit = (n: unknown) => {
    if (!n || typeof n !== "object") return;
    const s = n as Json;
    if (typeof s.$ref === "string") return visit(defs[s.$ref.replace(/^#\/\$defs\//, "")]);
    if (s.properties && typeof s.properties === "object") {
      for (const [k, v] of Object.entries(s.properties as Json)) out.set(k, [...(out.get(k) ?? []), v]);
    }
    for (const key of ["anyOf", "oneOf", "allOf"]) if (Array.isArray(s[key])) for (const b of s[key] as unknown[]) visit(b);
    if (s.items) visit(s.items);
  };
  visit(node);
  return out;
}

const FREE_FORM = new Set(["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);

/** Each field's proto comment, by `<message type name>.<field name>`, from the generated code's doc comments. */
function protoComments(): Map<string, string> {
  const file = new URL("../../../src/gen/portico/presets/v1/presets_service_pb.ts", import.meta.url);
  const out = new Map<string, string>();
  let message = "";
  for (const block of readFileSync(file, "utf8").matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
    const lines = block[1]!.split("\n").map((l) => l.replace(/^\s*\* ?/, "").trim());
    const text = lines.filter((l) => l && !l.startsWith("@")).join(" ");
    for (const l of lines) {
      const m = /^@generated from message ([\w.]+)/.exec(l);
      if (m) message = m[1]!;
      const f = /^@generated from field: .* (\w+) = \d+;$/.exec(l);
      if (f) out.set(`${message}.${f[1]}`, text);
    }
  }
  return out;
}

const COMMENTS = protoComments();
/** The default bound of zod's integers (a safe integer), which is no bound of the request's. */
const SAFE = Number.MAX_SAFE_INTEGER;
const INT_RANGE: Partial<Record<ScalarType, [number, number]>> = {
  [ScalarType.INT32]: [-(2 ** 31), 2 ** 31 - 1],
  [ScalarType.SINT32]: [-(2 ** 31), 2 ** 31 - 1],
  [ScalarType.SFIXED32]: [-(2 ** 31), 2 ** 31 - 1],
  [ScalarType.UINT32]: [0, 2 ** 32 - 1],
  [ScalarType.FIXED32]: [0, 2 ** 32 - 1],
  [ScalarType.INT64]: [-SAFE, SAFE],
  [ScalarType.SINT64]: [-SAFE, SAFE],
  [ScalarType.SFIXED64]: [-SAFE, SAFE],
  [ScalarType.UINT64]: [0, SAFE],
  [ScalarType.FIXED64]: [0, SAFE],
};

/** A JSON Schema node's alternatives (anyOf/oneOf flattened, $ref resolved), without `null`. */
function alternatives(nodes: unknown[], defs: Json): Json[] {
  const out: Json[] = [];
  const visit = (n: unknown) => {
    if (!n || typeof n !== "object") return;
    const s = n as Json;
    if (typeof s.$ref === "string") return visit(defs[s.$ref.replace(/^#\/\$defs\//, "")]);
    const branches = [...((s.anyOf as unknown[]) ?? []), ...((s.oneOf as unknown[]) ?? [])];
    if (branches.length > 0 && s.type === undefined) return branches.forEach(visit);
    if (s.type === "null") return;
    out.push(s);
  };
  nodes.forEach(visit);
  return out;
}

const typeOf = (n: Json): string => (typeof n.type === "string" ? n.type : n.const !== undefined ? typeof n.const : n.enum ? typeof (n.enum as unknown[])[0] : "any");

/** The JSON Schema type a proto scalar is on the wire of the JSON form. */
function jsonTypeOf(scalar: ScalarType): string {
  if (scalar === ScalarType.STRING || scalar === ScalarType.BYTES) return "string";
  if (scalar === ScalarType.BOOL) return "boolean";
  if (scalar === ScalarType.DOUBLE || scalar === ScalarType.FLOAT) return "number";
  return "integer";
}

/** Numbers a comment states (`-2.0` is -2; "one" is 1). */
function numbersIn(text: string): number[] {
  return [...text.replace(/\bone\b/g, "1").matchAll(/(?<![\w.])-?\d+(?:\.\d+)?(?![\w])/g)].map((m) => Number(m[0]));
}

/** The bounds a numeric field's comment states: "from A to B", "A to B", "between A and B", "at least A", "at most B". */
function commentRange(text: string): { min?: number; max?: number } {
  const t = text.replace(/\bone\b/g, "1");
  const NUM = "(-?\\d+(?:\\.\\d+)?)";
  const range = new RegExp(`(?:from |between )?${NUM} (?:to|and) ${NUM}`, "i").exec(t);
  if (range) return { min: Number(range[1]), max: Number(range[2]) };
  const out: { min?: number; max?: number } = {};
  const least = new RegExp(`at least ${NUM}`, "i").exec(t);
  if (least) out.min = Number(least[1]);
  const most = new RegExp(`at most ${NUM}`, "i").exec(t);
  if (most) out.max = Number(most[1]);
  return out;
}

/**
 * Fields whose typed proto form takes a subset of the JSON form's types, on purpose (the differences the
 * type check would report there). Nothing else may differ in type.
 */
const NARROWER_TYPED_FORM: Record<string, string> = {
  // A price is a decimal string (exact); the JSON form also takes a number, which the typed form writes as its decimal string.
  "ChatRequest.provider.max_price.prompt": "number",
  "ChatRequest.provider.max_price.completion": "number",
  "ChatRequest.provider.max_price.request": "number",
  "ChatRequest.provider.max_price.image": "number",
  "ChatRequest.provider.max_price.audio": "number",
};

/** The type, enumeration and bound differences of one proto field and its zod alternatives. */
function ruleDifferences(message: DescMessage, f: DescField, sub: unknown[], defs: Json, where: string): string[] {
  const out: string[] = [];
  const comment = COMMENTS.get(`${message.typeName}.${f.name}`) ?? "";
  let nodes = alternatives(sub, defs);
  let scalar: ScalarType | undefined;
  if (f.fieldKind === "list" || f.fieldKind === "map") {
    const container = f.fieldKind === "list" ? "array" : "object";
    const wrong = nodes.filter((n) => typeOf(n) !== container);
    if (wrong.length > 0) out.push(`${where}: ${f.fieldKind} in the proto, ${wrong.map(typeOf).join("|")} in the zod definition`);
    nodes.filter((n) => typeOf(n) === container).forEach((n) => out.push(...boundDifferences(n, comment, where, false)));
    const inner = nodes.map((n) => (f.fieldKind === "list" ? n.items : n.additionalProperties)).filter(Boolean);
    nodes = alternatives(inner, defs);
    scalar = f.fieldKind === "list" ? f.scalar : f.mapKind === "scalar" ? f.scalar : undefined;
    if ((f.fieldKind === "list" && f.listKind !== "scalar") || (f.fieldKind === "map" && f.mapKind !== "scalar")) return out;
  } else if (f.fieldKind === "scalar") {
    scalar = f.scalar;
  } else {
    const wrong = f.fieldKind === "message" && !FREE_FORM.has(f.message.typeName) ? nodes.filter((n) => typeOf(n) !== "object") : [];
    if (wrong.length > 0) out.push(`${where}: a message in the proto, ${wrong.map(typeOf).join("|")} in the zod definition`);
    return out;
  }
  if (scalar === undefined) return out;
  const want = jsonTypeOf(scalar);
  for (const n of nodes) {
    const got = typeOf(n);
    if (got !== want && got !== "any" && NARROWER_TYPED_FORM[where] !== got) out.push(`${where}: ${want} in the proto (${ScalarType[scalar]}), ${got} in the zod definition`);
  }
  const range = INT_RANGE[scalar];
  if (range) {
    for (const n of nodes) {
      const min = n.minimum as number | undefined;
      const max = n.maximum as number | undefined;
      if ((min !== undefined && min !== -SAFE && min < range[0]) || (max !== undefined && max !== SAFE && max > range[1])) {
        out.push(`${where}: zod's bounds ${min}..${max} do not fit the proto's ${ScalarType[scalar]}`);
      }
    }
  }
  // Enumerations: a zod enum (or the variants' literals) is exactly the comment's quoted values.
  const values = new Set<string>();
  for (const n of nodes) {
    for (const v of (n.enum as unknown[]) ?? []) if (typeof v === "string") values.add(v);
    if (typeof n.const === "string") values.add(n.const);
  }
  const free = nodes.some((n) => n.type === "string" && n.enum === undefined && n.const === undefined);
  if (values.size > 0 && !free) {
    const quoted = new Set([...comment.matchAll(/"([^"]+)"/g)].map((m) => m[1]!.replace(/^<brand>:/, "service:")));
    const missing = [...values].filter((v) => !quoted.has(v));
    const extra = [...quoted].filter((v) => !values.has(v));
    if (missing.length > 0) out.push(`${where}: zod allows ${missing.map((v) => JSON.stringify(v)).join(", ")}, not listed in the proto comment`);
    if (extra.length > 0) out.push(`${where}: the proto comment lists ${extra.map((v) => JSON.stringify(v)).join(", ")}, not allowed by zod`);
  }
  for (const n of nodes) out.push(...boundDifferences(n, comment, where, want === "number" || want === "integer"));
  return out;
}

/** A zod node's stated bounds against the field's comment (exactly, for a number: `numeric`). */
function boundDifferences(n: Json, comment: string, where: string, numeric: boolean): string[] {
  const out: string[] = [];
  const stated = numbersIn(comment);
  const bounds: [string, unknown][] = [
    ["minimum", n.minimum], ["maximum", n.maximum], ["exclusiveMinimum", n.exclusiveMinimum], ["exclusiveMaximum", n.exclusiveMaximum],
    ["minLength", n.minLength], ["maxLength", n.maxLength], ["minItems", n.minItems], ["maxItems", n.maxItems],
  ];
  for (const [name, v] of bounds) {
    if (typeof v !== "number" || Math.abs(v) === SAFE) continue;
    if (!stated.includes(v)) out.push(`${where}: zod's ${name} ${v} is not stated in the proto comment (${JSON.stringify(comment)})`);
  }
  if (numeric) {
    const c = commentRange(comment);
    const min = typeof n.minimum === "number" && n.minimum !== -SAFE ? n.minimum : undefined;
    const max = typeof n.maximum === "number" && n.maximum !== SAFE ? n.maximum : undefined;
    if (c.min !== undefined && c.min !== min) out.push(`${where}: the proto comment's lower bound ${c.min}, zod's ${min ?? "none"}`);
    if (c.max !== undefined && c.max !== max) out.push(`${where}: the proto comment's upper bound ${c.max}, zod's ${max ?? "none"}`);
  }
  return out;
}

function differences(message: DescMessage, node: unknown, defs: Json, path: string): string[] {
  const zodFields = propertiesOf(node, defs);
  const out: string[] = [];
  const protoNames = new Set(message.fields.map((f) => f.name));
  for (const f of message.fields) {
    const where = `${path}.${f.name}`;
    const sub = zodFields.get(f.name);
    if (!sub) {
      out.push(`${where}: in the proto, not in the zod definition`);
      continue;
    }
    out.push(...ruleDifferences(message, f, sub, defs, where));
    const child = f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") ? f.message : f.fieldKind === "map" && f.mapKind === "message" ? f.message : undefined;
    if (child && !FREE_FORM.has(child.typeName)) out.push(...differences(child, { anyOf: sub }, defs, where));
  }
  for (const name of zodFields.keys()) if (!protoNames.has(name)) out.push(`${path}.${name}: in the zod definition, not in the proto`);
  return [...new Set(out)];
}

describe("ChatRequest: one definition", () => {
  it("the typed proto ChatRequest and the zod definition have the same fields at every level", () => {
    const schema = requestJsonSchema(ChatRequest.schema("service")) as Json;
    const defs = (schema.$defs ?? {}) as Json;
    expect(differences(ChatRequestSchema, schema, defs, "ChatRequest")).toEqual([]);
  });

  it("the walk sees a difference when there is one", () => {
    const schema = requestJsonSchema(ChatRequest.schema("service")) as Json;
    const props = { ...(schema.properties as Json), not_in_proto: { type: "string" } };
    expect(differences(ChatRequestSchema, { ...schema, properties: props }, {}, "ChatRequest")).toContain(
      "ChatRequest.not_in_proto: in the zod definition, not in the proto",
    );
  });

  it("the walk sees a type, enumeration or bound that differs", () => {
    const schema = requestJsonSchema(ChatRequest.schema("service")) as Json;
    const props = schema.properties as Json;
    const drift = (key: string, node: unknown) => differences(ChatRequestSchema, { ...schema, properties: { ...props, [key]: node } }, {}, "ChatRequest");
    expect(COMMENTS.get("portico.presets.v1.ChatRequest.temperature")).toBe("Sampling temperature from 0 to 2.");
    expect(drift("temperature", { type: "string" })).toContain("ChatRequest.temperature: number in the proto (DOUBLE), string in the zod definition");
    expect(drift("top_k", { type: "number", minimum: 0 })).toContain("ChatRequest.top_k: integer in the proto (INT32), number in the zod definition");
    expect(drift("stream", { anyOf: [{ type: "integer" }, { type: "null" }] })).toContain("ChatRequest.stream: boolean in the proto (BOOL), integer in the zod definition");
    expect(drift("models", { type: "string" })).toContain("ChatRequest.models: list in the proto, string in the zod definition");
    expect(drift("models", { type: "array", items: { type: "integer" }, maxItems: 16 })).toContain("ChatRequest.models: string in the proto (STRING), integer in the zod definition");
    expect(drift("metadata", { type: "object", additionalProperties: { type: "number" } })).toContain("ChatRequest.metadata: string in the proto (STRING), number in the zod definition");
    const tiers = ["auto", "default", "fast", "flex", "priority", "scale"];
    expect(drift("service_tier", { type: "string", enum: [...tiers, "turbo"] })).toContain('ChatRequest.service_tier: zod allows "turbo", not listed in the proto comment');
    expect(drift("service_tier", { type: "string", enum: tiers.filter((t) => t !== "scale") })).toContain('ChatRequest.service_tier: the proto comment lists "scale", not allowed by zod');
    expect(drift("temperature", { type: "number", minimum: 0, maximum: 3 })).toEqual(
      expect.arrayContaining(["ChatRequest.temperature: the proto comment's upper bound 2, zod's 3", expect.stringMatching(/^ChatRequest.temperature: zod's maximum 3 is not stated/)]),
    );
    expect(drift("temperature", { type: "number", minimum: 0 })).toContain("ChatRequest.temperature: the proto comment's upper bound 2, zod's none");
    expect(drift("top_logprobs", { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER })).toContain("ChatRequest.top_logprobs: the proto comment's upper bound 20, zod's none");
    expect(drift("session_id", { type: "string", maxLength: 300 })).toEqual([expect.stringMatching(/^ChatRequest.session_id: zod's maxLength 300 is not stated/)]);
    expect(drift("models", { type: "array", items: { type: "string" }, maxItems: 17 })).toEqual([expect.stringMatching(/^ChatRequest.models: zod's maxItems 17 is not stated/)]);
    expect(drift("top_k", { type: "integer", minimum: 0, maximum: 2 ** 40 })).toEqual(
      expect.arrayContaining(["ChatRequest.top_k: zod's bounds 0..1099511627776 do not fit the proto's INT32"]),
    );
  });
});
