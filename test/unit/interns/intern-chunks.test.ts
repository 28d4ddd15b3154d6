import { readFileSync } from "node:fs";
import { fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { StreamChatResponseSchema } from "../../../src/gen/portico/interns/v1/interns_service_pb.js";
import { defaultModel, errorChunk, finalChunk, provideInputName, toChunk } from "../../../src/gateway/presenters/intern-chunks.js";

const fixture = JSON.parse(readFileSync(new URL("./fixtures/chunks.json", import.meta.url), "utf8"));

describe("intern chunk presenter", () => {
  it.each(fixture.cases.map((c: any) => [c.name, c]) as Array<[string, any]>)("%s", (_name: string, c: any) => {
    const ev = fromJson(StreamChatResponseSchema, c.event);
    const out = toChunk(ev, fixture.context);
    expect(out.kind).toBe("chunk");
    if (out.kind === "chunk") expect(JSON.parse(JSON.stringify(out.chunk))).toEqual(c.chunk);
  });

  it("a heartbeat is not a chunk", () => {
    expect(toChunk(fromJson(StreamChatResponseSchema, { heartbeat: {} }), fixture.context)).toEqual({ kind: "heartbeat" });
  });

  it("the brand word lives in one place", () => {
    const ctx = { ...fixture.context, brand: "acme" };
    expect(defaultModel("acme")).toBe("acme/intern");
    expect(provideInputName("acme")).toBe("acme.provide_input");
    const q = toChunk(fromJson(StreamChatResponseSchema, { question: { interactionId: "i", kind: "permission", options: [] } }), ctx);
    expect(q.kind === "chunk" && (q.chunk.choices[0]!.delta.tool_calls as any)[0].function.name).toBe("acme.provide_input");
    expect(errorChunk(ctx, "", { code: 502, message: "m", reason: "stream_severed", retryable: true }).model).toBe("acme/intern");
    expect(finalChunk(ctx, "", null, null)).toMatchObject({ choices: [], session_id: null, usage: null });
  });
});
