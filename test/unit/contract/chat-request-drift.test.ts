/**
 * The ChatRequest is defined once: the zod definition (src/contract/requests/chat-request.ts) is the source
 * of truth, and the typed proto message `portico.presets.v1.ChatRequest` (presets' `chat_request`) must carry
 * the same fields at every level. This walks both — the proto descriptor and the JSON Schema derived from the
 * zod definition — and fails on any field present in one but not the other, so they cannot drift.
 *
 * Where the proto holds a sub-object as google.protobuf.Struct/Value/ListValue (free-form JSON), the walk
 * stops on that branch; a discriminated union (plugins, messages, tools) is compared as the union of its
 * variants' fields, which is how the proto message holds it.
 */
import { describe, expect, it } from "vitest";
import type { DescMessage } from "@bufbuild/protobuf";
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
    const child = f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") ? f.message : f.fieldKind === "map" && f.mapKind === "message" ? f.message : undefined;
    if (child && !FREE_FORM.has(child.typeName)) out.push(...differences(child, { anyOf: sub }, defs, where));
  }
  for (const name of zodFields.keys()) if (!protoNames.has(name)) out.push(`${path}.${name}: in the zod definition, not in the proto`);
  return out;
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
});
