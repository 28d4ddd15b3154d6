/**
 * The split hop's codec (src/lib/proto-codec.ts) against protobuf-es for every message of every generated file: the
 * same bytes as `toBinary` for random messages (and init objects), the same message as `fromBinary` (own properties in
 * the same order) for their bytes and for bytes it must leave to protobuf-es (unknown fields, other wire types, invalid
 * UTF-8, a leading byte-order mark, truncation), and protobuf-es never asked for the chat hop's messages.
 */
import { readdirSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { create, fromBinary, ScalarType, toBinary, type DescField, type DescFile, type DescMessage } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { codecOf } from "../../../src/lib/proto-codec.js";
import {
  CreateChatCompletionRequestSchema,
  CreateChatCompletionResponseSchema,
  StreamChatCompletionRequestSchema,
  StreamChatCompletionResponseSchema,
  StreamMessageResponseSchema,
  StreamResponseResponseSchema,
  StreamGenerateContentResponseSchema,
  ResponseEventSchema,
} from "../../../src/gen/portico/chat/v1/chat_service_pb.js";

const GEN = resolve(import.meta.dirname, "../../../src/gen");

function pbFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? pbFiles(join(dir, e.name)) : e.name.endsWith("_pb.ts") ? [join(dir, e.name)] : [],
  );
}

async function allMessages(): Promise<DescMessage[]> {
  const out = new Map<string, DescMessage>();
  const add = (m: DescMessage) => {
    if (out.has(m.typeName)) return;
    out.set(m.typeName, m);
    for (const n of m.nestedMessages) add(n);
  };
  for (const path of pbFiles(GEN)) {
    const mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
    for (const v of Object.values(mod)) {
      if (v && typeof v === "object" && (v as DescFile).kind === "file") for (const m of (v as DescFile).messages) add(m);
    }
  }
  return [...out.values()];
}

/** A small deterministic PRNG (mulberry32). */
function rng(seed: number) {
  let a = seed;
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = ["", "a", "Say hello.", "héllo wörld", "日本語", "emoji 😀 pair", "\uFEFFbom first", "lone \uD800 surrogate", "x".repeat(130), "y".repeat(3_000), '{"model":"groq/x","messages":[]}'];
const DOUBLES = [0, -0, 1.5, -3, 1e300, Number.NaN, Number.POSITIVE_INFINITY, 5e-324];

function randomScalar(type: ScalarType, r: () => number, longAsString: boolean): unknown {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  switch (type) {
    case ScalarType.STRING:
      return pick(STRINGS);
    case ScalarType.BOOL:
      return r() < 0.5;
    case ScalarType.DOUBLE:
      return pick(DOUBLES);
    case ScalarType.FLOAT:
      return pick([0, -0, 1.5, -2.25]);
    case ScalarType.BYTES:
      return pick([new Uint8Array(0), new Uint8Array([1, 2, 3])]);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return longAsString ? pick(["0", "-5", "123456789012"]) : pick([0n, -5n, 123456789012n]);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return longAsString ? pick(["0", "7", "123456789012"]) : pick([0n, 7n, 123456789012n]);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return pick([0, 1, 300, 4294967295]);
    default:
      return pick([0, 1, -1, 300, 2147483647]);
  }
}

function randomValue(f: DescField, r: () => number, depth: number): unknown {
  switch (f.fieldKind) {
    case "scalar":
      return randomScalar(f.scalar, r, f.longAsString);
    case "enum":
      return f.enum.values[Math.floor(r() * f.enum.values.length)]!.number;
    case "list":
      if (f.listKind === "scalar") return Array.from({ length: Math.floor(r() * 4) }, () => randomScalar(f.scalar, r, f.longAsString));
      if (f.listKind === "enum") return Array.from({ length: Math.floor(r() * 3) }, () => f.enum.values[0]!.number);
      return depth > 2 ? [] : Array.from({ length: Math.floor(r() * 2) }, () => randomMessage(f.message, r, depth + 1));
    case "map":
      return {};
    case "message":
      if (f.message.typeName === "google.protobuf.Struct") return { model: "groq/x", n: 1, list: [true, null, "s"] };
      if (depth > 2) return undefined;
      return randomMessage(f.message, r, depth + 1);
  }
}

/** A message with each field set at random (about half of them), as an init object. */
function randomInit(schema: DescMessage, r: () => number, depth = 0): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  for (const f of schema.fields) {
    if (r() < 0.5) continue;
    const v = randomValue(f, r, depth);
    if (v === undefined) continue;
    if (f.oneof) init[f.oneof.localName] = { case: f.localName, value: v };
    else init[f.localName] = v;
  }
  return init;
}

function randomMessage(schema: DescMessage, r: () => number, depth = 0) {
  return create(schema, randomInit(schema, r, depth) as never);
}

const keysOf = (m: object) => Object.keys(m);

describe("proto-codec against protobuf-es", async () => {
  const messages = await allMessages();

  it("finds the generated messages, the chat hop's among them", () => {
    expect(messages.length).toBeGreaterThan(100);
    expect(messages.map((m) => m.typeName)).toContain("portico.chat.v1.CreateChatCompletionRequest");
  });

  it("writes the bytes toBinary writes and reads the message fromBinary reads, for random messages of every generated type", () => {
    // Compared with Buffer.equals and isDeepStrictEqual (an expect per value costs too much for ≈ 1,500 messages).
    const r = rng(24);
    const mismatches: string[] = [];
    let fast = 0;
    for (const schema of messages) {
      const codec = codecOf(schema);
      for (let i = 0; i < 12; i++) {
        const init = randomInit(schema, r);
        const msg = create(schema, init as never);
        const expected = Buffer.from(toBinary(schema, msg));
        const label = `${schema.typeName} #${i}`;
        const before = codec.fallbacks;
        if (!codec.encode(msg).equals(expected)) mismatches.push(`${label}: encode`);
        if (codec.fallbacks === before) fast++;
        if (!codec.encode(init).equals(expected)) mismatches.push(`${label}: encode (init)`);
        if (!codec.encode(msg, 5).subarray(5).equals(expected)) mismatches.push(`${label}: encode (headroom)`);
        const read = codec.decode(expected) as Record<string, unknown>;
        const want = fromBinary(schema, expected);
        if (!isDeepStrictEqual(read, want)) mismatches.push(`${label}: decode`);
        if (!isDeepStrictEqual(keysOf(read), keysOf(want))) mismatches.push(`${label}: keys ${keysOf(read)} / ${keysOf(want)}`);
        // No member shared with the codec's template or another message (lists, maps, oneofs are its own).
        const again = codec.decode(expected) as Record<string, unknown>;
        for (const k of keysOf(read)) if (typeof again[k] === "object" && again[k] !== null && again[k] === read[k]) mismatches.push(`${label}: shares ${k}`);
      }
    }
    expect(mismatches).toEqual([]);
    expect(fast).toBeGreaterThan(300); // the codec's own path was taken, not only protobuf-es's
  });

  const hop = [CreateChatCompletionRequestSchema, CreateChatCompletionResponseSchema, StreamChatCompletionRequestSchema, StreamChatCompletionResponseSchema];

  it("answers the chat hop's messages without protobuf-es (body_json, completion_json, chunk_json and timing)", () => {
    const cases: Array<[DescMessage, Record<string, unknown>]> = [
      [CreateChatCompletionRequestSchema, { bodyJson: '{"model":"groq/x","messages":[{"role":"user","content":"hé 😀"}]}', jsonText: true }],
      [StreamChatCompletionRequestSchema, { bodyJson: '{"model":"groq/x","stream":true}', jsonText: true }],
      [CreateChatCompletionResponseSchema, { completionJson: '{"id":"c1","choices":[]}', upstreamMs: 12.25, provider: "groq", cache: "miss" }],
      [StreamChatCompletionResponseSchema, { chunkJson: '{"id":"c1"}', upstreamMs: 0.5, provider: "groq" }],
      [StreamChatCompletionResponseSchema, {}],
    ];
    for (const [schema, init] of cases) {
      const codec = codecOf(schema);
      const before = codec.fallbacks;
      const bytes = codec.encode(init);
      expect(Buffer.from(bytes)).toEqual(Buffer.from(toBinary(schema, create(schema, init as never))));
      expect(codec.decode(bytes)).toEqual(fromBinary(schema, bytes));
      expect(codec.encode(create(schema, init as never)).byteLength).toBe(bytes.byteLength);
      expect(codec.fallbacks, schema.typeName).toBe(before);
    }
  });

  it("answers the dialects' streamed messages without protobuf-es (repeated events of flat messages, packed)", () => {
    const events = Array.from({ length: 40 }, (_, i) => ({ type: i % 2 ? "content_block_delta" : "ping", dataJson: i % 3 ? `{"i":${i},"t":"hé 😀"}` : "" }));
    const cases: Array<[DescMessage, Record<string, unknown>]> = [
      [StreamMessageResponseSchema, { events, upstreamMs: 3.5, provider: "anthropic", cache: "miss" }],
      [StreamMessageResponseSchema, { events: [] }],
      [StreamMessageResponseSchema, { events: [{ type: "", dataJson: "" }] }],
      [StreamResponseResponseSchema, { events: events.map((e) => create(ResponseEventSchema, e)) }],
      [StreamGenerateContentResponseSchema, { chunksJson: events.map((e) => e.dataJson), provider: "google-ai-studio" }],
      [StreamChatCompletionResponseSchema, { chunkJson: '{"id":"c1"}', moreChunksJson: ['{"id":"c2"}', "", '{"id":"c3 ☃"}'], upstreamMs: 0.5 }],
    ];
    for (const [schema, init] of cases) {
      const codec = codecOf(schema);
      const before = codec.fallbacks;
      const bytes = codec.encode(init);
      expect(Buffer.from(bytes)).toEqual(Buffer.from(toBinary(schema, create(schema, init as never))));
      expect(codec.decode(bytes)).toEqual(fromBinary(schema, bytes));
      expect(codec.fallbacks, schema.typeName).toBe(before);
    }
    // An item of another type, or with unknown fields, goes to protobuf-es (its result then).
    const codec = codecOf(StreamMessageResponseSchema);
    const before = codec.fallbacks;
    const other = { events: [create(ResponseEventSchema, { type: "x" })] };
    const outcome = (f: () => Uint8Array) => {
      try {
        return Buffer.from(f());
      } catch (e) {
        return `throws ${(e as Error).message}`;
      }
    };
    expect(outcome(() => codec.encode(other))).toEqual(outcome(() => toBinary(StreamMessageResponseSchema, create(StreamMessageResponseSchema, other as never))));
    expect(codec.fallbacks).toBe(before + 1);
  });

  it("leaves a Struct body and unknown fields to protobuf-es, with the same result", () => {
    const codec = codecOf(CreateChatCompletionRequestSchema);
    const withBody = { body: { model: "groq/x", messages: [{ role: "user", content: "hi" }] }, jsonText: true };
    const bytes = codec.encode(withBody);
    expect(Buffer.from(bytes)).toEqual(Buffer.from(toBinary(CreateChatCompletionRequestSchema, create(CreateChatCompletionRequestSchema, withBody as never))));
    expect(codec.decode(bytes)).toEqual(fromBinary(CreateChatCompletionRequestSchema, bytes));
    // Field 9 (unknown to this schema), a varint, after a known one: kept as protobuf-es keeps it, and written back.
    const unknown = Buffer.concat([Buffer.from(codec.encode({ bodyJson: "{}" })), Buffer.from([9 << 3, 5])]);
    const read = codec.decode(unknown);
    expect(read).toEqual(fromBinary(CreateChatCompletionRequestSchema, unknown));
    expect((read as { $unknown?: unknown[] }).$unknown).toHaveLength(1);
    expect(Buffer.from(codec.encode(read))).toEqual(unknown);
  });

  it("reads awkward bytes as fromBinary does: other wire types, repeated singular fields, long varints, a leading BOM", () => {
    for (const schema of hop) {
      const codec = codecOf(schema);
      const str = schema.fields.find((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING && !f.oneof)!;
      const dbl = schema.fields.find((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.DOUBLE);
      const bool = schema.fields.find((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.BOOL);
      const tag = (f: DescField, wire: number) => (f.number << 3) | wire;
      const cases: Buffer[] = [
        // the same string field twice (the last wins), with a non-minimal length varint
        Buffer.from([tag(str, 2), 1, 0x61, tag(str, 2), 0x82, 0x00, 0x62, 0x63]),
        // a string with a leading byte-order mark (protobuf-es's TextDecoder drops it)
        Buffer.from([tag(str, 2), 4, 0xef, 0xbb, 0xbf, 0x41]),
        // a known field with another wire type (varint where a string is expected)
        Buffer.from([tag(str, 0), 1]),
        // a non-minimal tag
        Buffer.from([tag(str, 2) | 0x80, 0x00, 1, 0x7a]),
      ];
      if (bool) cases.push(Buffer.from([tag(bool, 0), 0x80, 0x80, 0x01]), Buffer.from([tag(bool, 0), 2]), Buffer.from([tag(bool, 0), 0]));
      if (dbl) cases.push(Buffer.concat([Buffer.from([tag(dbl, 1)]), Buffer.from(new Float64Array([-0]).buffer)]));
      for (const bytes of cases) {
        const label = `${schema.typeName} ${bytes.toString("hex")}`;
        expect(outcome(() => codec.decode(bytes)), label).toEqual(outcome(() => fromBinary(schema, bytes)));
      }
    }
  });

  it("fails where fromBinary fails: truncated messages, invalid UTF-8, a length past the end", () => {
    const schema = CreateChatCompletionRequestSchema;
    const codec = codecOf(schema);
    const good = Buffer.from(codec.encode({ bodyJson: '{"model":"x"}', jsonText: true }));
    const bad: Buffer[] = [good.subarray(0, good.length - 3), good.subarray(0, 1), Buffer.from([3 << 3 | 2, 2, 0xc3, 0x28]), Buffer.from([3 << 3 | 2, 50, 0x61]), Buffer.from([0x80])];
    for (const bytes of bad) {
      let want: unknown;
      try {
        fromBinary(schema, bytes);
      } catch (e) {
        want = e;
      }
      expect(want, bytes.toString("hex")).toBeInstanceOf(Error);
      expect(() => codec.decode(bytes)).toThrow((want as Error).message);
    }
  });

  it("writes a value of the wrong type as toBinary does (protobuf-es coerces or refuses it)", () => {
    const schema = CreateChatCompletionResponseSchema;
    for (const init of [{ completionJson: 5, upstreamMs: "x" }, { provider: { a: 1 } }, { upstreamMs: 2n }, { cache: ["x"] }] as never[]) {
      const bytes = (u: Uint8Array) => Buffer.from(u).toString("hex");
      expect(outcome(() => bytes(codecOf(schema).encode(init)))).toEqual(outcome(() => bytes(toBinary(schema, create(schema, init)))));
    }
  });
});

/** A call's value (and a message's own keys in order), or its error's message. */
function outcome(fn: () => unknown): unknown {
  try {
    const value = fn();
    return { value, keys: value && typeof value === "object" ? Object.keys(value) : undefined };
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
}
