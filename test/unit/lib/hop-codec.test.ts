/**
 * The hop channel's hand-written envelope codec (src/lib/hop-codec.ts) against protobuf-es and the generated schema:
 * generated round trips (the same bytes as `toBinary`, the right gRPC frame prefix, the same message back from
 * `decode…` and from `fromBinary`), other writers' output built with protobuf-es's `BinaryWriter` (fields in any
 * order, unknown fields of every wire type, scalars written twice, map entries missing key or value), malformed input
 * (truncation, lengths past the end, overlong varints, field number 0, wire types 3/4/6/7) and the byte views it is
 * given (plain Uint8Array, a Buffer slice at a non-zero offset).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import {
  decodeCall,
  decodeReply,
  encodeCallFrame,
  encodeReplyFrame,
  type HopCall,
  type HopReply,
} from "../../../src/lib/hop-codec.js";
import { ExchangeRequestSchema, ExchangeResponseSchema } from "../../../src/gen/portico/hop/v1/hop_service_pb.js";
import { mulberry32 } from "../../helpers/prng.js";

type Rand = () => number;

const int = (r: Rand, n: number): number => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

/** Values around every varint length boundary, and the uint32 extremes. */
const BOUNDARIES = [
  1, 127, 128, 255, 256, 16383, 16384, 2 ** 21 - 1, 2 ** 21, 2 ** 28 - 1, 2 ** 28, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1,
];

function uint32(r: Rand): number {
  switch (int(r, 6)) {
    case 0:
      return 0;
    case 1:
      return int(r, 300);
    case 2:
      return pick(r, BOUNDARIES);
    case 3:
      return int(r, 2 ** 31);
    default:
      return int(r, 2 ** 32);
  }
}

/**
 * Code points of every UTF-8 length: ASCII, two-byte (Latin-1 and up), three-byte (BMP, excluding surrogates and
 * U+FEFF, which `fromBinary`'s TextDecoder strips at a string's start: see the byte-order-mark test) and astral.
 */
function codePoint(r: Rand): number {
  switch (int(r, 5)) {
    case 0:
    case 1:
      return 0x20 + int(r, 0x5f);
    case 2:
      return pick(r, [0, 0x7f, 0x80, 0xe9, 0xff, 0x100, 0x7ff, 0x3b1]);
    case 3:
      return pick(r, [0x800, 0x20ac, 0x4e2d, 0xfffd, 0xffff, 0xd7ff, 0xe000]);
    default:
      return pick(r, [0x10000, 0x1f600, 0x1f680, 0x10ffff]);
  }
}

function str(r: Rand, max = 24): string {
  switch (int(r, 5)) {
    case 0:
      return "";
    case 1: {
      let s = "";
      for (let n = int(r, max) + 1; n > 0; n--) s += String.fromCharCode(0x20 + int(r, 0x5f));
      return s;
    }
    default: {
      let s = "";
      for (let n = int(r, max) + 1; n > 0; n--) s += String.fromCodePoint(codePoint(r));
      return s;
    }
  }
}

function bytes(r: Rand): Uint8Array {
  const len = pick(r, [0, 0, 1, 2, int(r, 130), int(r, 20_000), 16_384 + int(r, 8_000)]);
  const b = new Uint8Array(len);
  for (let i = 0; i < len; i++) b[i] = int(r, 256);
  return b;
}

function headerMap(r: Rand): Record<string, string> {
  const h: Record<string, string> = {};
  for (let n = int(r, 11); n > 0; n--) h[int(r, 4) === 0 ? pick(r, ["", "a", "x-id", "1", "42"]) : str(r, 12)] = str(r);
  return h;
}

const NAMES = ["", "grpc-status", "grpc-message", "x-dup", "set-cookie", "ü-name"];

function pairs(r: Rand): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let n = int(r, 11); n > 0; n--) out.push([int(r, 2) ? pick(r, NAMES) : str(r, 12), str(r)]);
  return out;
}

function randomCall(r: Rand): HopCall {
  return {
    id: uint32(r),
    method: int(r, 4) === 0 ? "/portico.chat.v1.ChatService/CreateChatCompletion" : str(r, 40),
    input: bytes(r),
    timeoutMs: uint32(r),
    headers: headerMap(r),
    cancel: int(r, 3) === 0,
  };
}

function randomReply(r: Rand): HopReply {
  return { id: uint32(r), output: bytes(r), headers: pairs(r), trailers: pairs(r), refused: int(r, 3) === 0 };
}

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex");

/** Comparable shapes: bytes as hex (Buffer and Uint8Array alike), headers as a plain object. */
function callShape(c: { id: number; method: string; input: Uint8Array; timeoutMs: number; headers: Record<string, string>; cancel: boolean }) {
  return { id: c.id, method: c.method, input: hex(c.input), timeoutMs: c.timeoutMs, headers: { ...c.headers }, cancel: c.cancel };
}

function replyShape(x: HopReply) {
  return { id: x.id, output: hex(x.output), headers: x.headers, trailers: x.trailers, refused: x.refused };
}

function pbCall(bytes: Uint8Array) {
  return callShape(fromBinary(ExchangeRequestSchema, bytes));
}

function pbReply(bytes: Uint8Array) {
  const m = fromBinary(ExchangeResponseSchema, bytes);
  const list = (l: Array<{ name: string; value: string }>): Array<[string, string]> => l.map((p) => [p.name, p.value]);
  return replyShape({ id: m.id, output: m.output, headers: list(m.headers), trailers: list(m.trailers), refused: m.refused });
}

function callToBinary(c: HopCall): Uint8Array {
  return toBinary(ExchangeRequestSchema, create(ExchangeRequestSchema, c));
}

function replyToBinary(x: HopReply): Uint8Array {
  const list = (l: Array<[string, string]>) => l.map(([name, value]) => ({ name, value }));
  return toBinary(
    ExchangeResponseSchema,
    create(ExchangeResponseSchema, { ...x, headers: list(x.headers), trailers: list(x.trailers) }),
  );
}

function expectFrame(frame: Buffer, expected: Uint8Array): Uint8Array {
  expect(frame[0]).toBe(0);
  expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
  const body = frame.subarray(5);
  expect(hex(body)).toBe(hex(expected));
  return body;
}

describe("generated round trips", () => {
  it("calls: toBinary's bytes in a correct frame, decoded back by decodeCall and fromBinary", () => {
    for (const seed of [1, 2, 3]) {
      const r = mulberry32(seed);
      for (let i = 0; i < 1200; i++) {
        const call = randomCall(r);
        const body = expectFrame(encodeCallFrame(call), callToBinary(call));
        expect(callShape(decodeCall(body))).toEqual(callShape(call));
        expect(pbCall(body)).toEqual(callShape(call));
      }
    }
  });

  it("replies: toBinary's bytes in a correct frame, decoded back by decodeReply and fromBinary", () => {
    for (const seed of [11, 12, 13]) {
      const r = mulberry32(seed);
      for (let i = 0; i < 1200; i++) {
        const reply = randomReply(r);
        const body = expectFrame(encodeReplyFrame(reply), replyToBinary(reply));
        expect(replyShape(decodeReply(body))).toEqual(replyShape(reply));
        expect(pbReply(body)).toEqual(replyShape(reply));
      }
    }
  });

  it("the zero message is an empty frame", () => {
    const call: HopCall = { id: 0, method: "", input: new Uint8Array(0), timeoutMs: 0, headers: {}, cancel: false };
    const reply: HopReply = { id: 0, output: new Uint8Array(0), headers: [], trailers: [], refused: false };
    expect(hex(encodeCallFrame(call))).toBe("0000000000");
    expect(hex(encodeReplyFrame(reply))).toBe("0000000000");
    expect(callShape(decodeCall(new Uint8Array(0)))).toEqual(callShape(call));
    expect(replyShape(decodeReply(new Uint8Array(0)))).toEqual(replyShape(reply));
  });

  it("every boundary id and timeout, alone and together, against toBinary", () => {
    for (const n of [0, ...BOUNDARIES]) {
      for (const m of [0, n]) {
        const call: HopCall = { id: n, method: "", input: new Uint8Array(0), timeoutMs: m, headers: {}, cancel: false };
        const body = expectFrame(encodeCallFrame(call), callToBinary(call));
        expect(callShape(decodeCall(body))).toEqual(callShape(call));
        const reply: HopReply = { id: n, output: new Uint8Array(0), headers: [], trailers: [], refused: false };
        expect(replyShape(decodeReply(expectFrame(encodeReplyFrame(reply), replyToBinary(reply))))).toEqual(
          replyShape(reply),
        );
      }
    }
  });

  it("map entries and metadata with an empty key, name or value, against toBinary", () => {
    const call: HopCall = {
      id: 1,
      method: "m",
      input: new Uint8Array(0),
      timeoutMs: 0,
      headers: { "": "v", a: "", b: "w" },
      cancel: false,
    };
    const body = expectFrame(encodeCallFrame(call), callToBinary(call));
    expect(callShape(decodeCall(body))).toEqual(callShape(call));
    const reply: HopReply = {
      id: 1,
      output: new Uint8Array(0),
      headers: [["", ""], ["a", ""], ["", "v"]],
      trailers: [["", ""]],
      refused: false,
    };
    expect(replyShape(decodeReply(expectFrame(encodeReplyFrame(reply), replyToBinary(reply))))).toEqual(
      replyShape(reply),
    );
  });

  it("lone surrogates: written as U+FFFD, the bytes toBinary writes", () => {
    const call: HopCall = {
      id: 1,
      method: "a\ud800b",
      input: new Uint8Array(0),
      timeoutMs: 0,
      headers: { "\udc00": "\ud83d" },
      cancel: false,
    };
    const body = expectFrame(encodeCallFrame(call), callToBinary(call));
    expect(decodeCall(body)).toMatchObject({ method: "a\ufffdb", headers: { "\ufffd": "\ufffd" } });
    const reply: HopReply = { id: 1, output: new Uint8Array(0), headers: [["\ud800", "x\udfff"]], trailers: [], refused: false };
    expect(decodeReply(expectFrame(encodeReplyFrame(reply), replyToBinary(reply))).headers).toEqual([["\ufffd", "x\ufffd"]]);
  });

  it("input and output come back as views into the given bytes", () => {
    const input = Uint8Array.from({ length: 300 }, (_, i) => i & 0xff);
    const body = encodeCallFrame({ id: 7, method: "m", input, timeoutMs: 0, headers: {}, cancel: false }).subarray(5);
    const call = decodeCall(body);
    expect(call.input.buffer).toBe(body.buffer);
    expect(hex(call.input)).toBe(hex(input));
    const rbody = encodeReplyFrame({ id: 7, output: input, headers: [], trailers: [], refused: false }).subarray(5);
    const reply = decodeReply(rbody);
    expect(reply.output.buffer).toBe(rbody.buffer);
    expect(hex(reply.output)).toBe(hex(input));
  });

  it("a string starting with a byte-order mark: same bytes as toBinary, kept by decode (TextDecoder drops it)", () => {
    const call: HopCall = {
      id: 1,
      method: "\ufeff/a",
      input: new Uint8Array(0),
      timeoutMs: 0,
      headers: { "\ufeffk": "\ufeffv" },
      cancel: false,
    };
    const body = expectFrame(encodeCallFrame(call), callToBinary(call));
    expect(callShape(decodeCall(body))).toEqual(callShape(call));
  });
});

/** One field written by another writer, and its effect on the expected message. */
type CallOp = { write: (w: BinaryWriter) => void; apply: (c: HopCall) => void };
type ReplyOp = { write: (w: BinaryWriter) => void; apply: (x: HopReply) => void };

/** An unknown field of a random wire type (numbers the messages do not use, up to the largest field number). */
function unknownField(r: Rand, w: BinaryWriter): void {
  const no = pick(r, [7, 15, 16, 100, 2047, 2048, 2 ** 29 - 1]);
  switch (int(r, 4)) {
    case 0:
      w.tag(no, WireType.Varint).uint64(pick(r, [0n, 1n, 300n, 2n ** 63n, 2n ** 64n - 1n]));
      break;
    case 1:
      w.tag(no, WireType.Bit64).fixed64(pick(r, [0n, 2n ** 64n - 1n, 1234567890123n]));
      break;
    case 2:
      w.tag(no, WireType.LengthDelimited).bytes(bytes(r).subarray(0, 200));
      break;
    default:
      w.tag(no, WireType.Bit32).fixed32(int(r, 2 ** 32));
  }
}

/** A map entry or Metadata message as another writer may send it: key/value missing, reordered, repeated, unknowns. */
function writeEntry(r: Rand, w: BinaryWriter, no: number, k: string, v: string, seen: { unknowns: boolean }): [string, string] {
  const parts: Array<(w: BinaryWriter) => void> = [];
  if (k !== "" || int(r, 2)) parts.push((w) => w.tag(1, WireType.LengthDelimited).string(k));
  if (v !== "" || int(r, 2)) parts.push((w) => w.tag(2, WireType.LengthDelimited).string(v));
  if (int(r, 4) === 0) {
    const earlier = str(r, 4);
    const f = int(r, 2) ? 1 : 2;
    parts.unshift((w) => w.tag(f, WireType.LengthDelimited).string(earlier));
  }
  if (int(r, 2)) parts.reverse();
  for (let n = int(r, 3); n > 0; n--) {
    parts.splice(int(r, parts.length + 1), 0, (w) => unknownField(r, w));
    seen.unknowns = true;
  }
  const entry = new BinaryWriter();
  for (const p of parts) p(entry);
  const bytes = entry.finish();
  w.tag(no, WireType.LengthDelimited).bytes(bytes);
  // Its effect: each key/value field in order, the last winning.
  let key = "";
  let value = "";
  const rd = new BinaryReader(bytes);
  while (rd.pos < rd.len) {
    const [f, wt] = rd.tag();
    if (f === 1 && wt === WireType.LengthDelimited) key = rd.string();
    else if (f === 2 && wt === WireType.LengthDelimited) value = rd.string();
    else rd.skip(wt);
  }
  return [key, value];
}

function callOps(r: Rand, c: HopCall, seen: { unknowns: boolean }): CallOp[] {
  const ops: CallOp[] = [];
  const id = (n: number): CallOp => ({ write: (w) => w.tag(1, WireType.Varint).uint32(n), apply: (x) => void (x.id = n) });
  const method = (s: string): CallOp => ({
    write: (w) => w.tag(2, WireType.LengthDelimited).string(s),
    apply: (x) => void (x.method = s),
  });
  const input = (b: Uint8Array): CallOp => ({
    write: (w) => w.tag(3, WireType.LengthDelimited).bytes(b),
    apply: (x) => void (x.input = b),
  });
  const timeout = (n: number): CallOp => ({
    write: (w) => w.tag(4, WireType.Varint).uint32(n),
    apply: (x) => void (x.timeoutMs = n),
  });
  const cancel = (b: boolean): CallOp => ({ write: (w) => w.tag(6, WireType.Varint).bool(b), apply: (x) => void (x.cancel = b) });
  // Each scalar maybe written twice (the first a different value), zero values sometimes written explicitly.
  const twice = <T>(mk: (v: T) => CallOp, v: T, other: T, zero: T) => {
    if (int(r, 3) === 0) ops.push(mk(other));
    if (v !== zero || int(r, 2)) ops.push(mk(v));
  };
  twice(id, c.id, uint32(r), 0);
  twice(method, c.method, str(r), "");
  if (int(r, 3) === 0) ops.push(input(bytes(r)));
  if (c.input.length || int(r, 2)) ops.push(input(c.input));
  twice(timeout, c.timeoutMs, uint32(r), 0);
  twice(cancel, c.cancel, int(r, 2) === 0, false);
  for (const [k, v] of Object.entries(c.headers)) {
    let written: [string, string] = ["", ""];
    ops.push({
      write: (w) => void (written = writeEntry(r, w, 5, k, v, seen)),
      apply: (x) => void (x.headers[written[0]] = written[1]),
    });
  }
  for (let n = int(r, 4); n > 0; n--) ops.push({ write: (w) => unknownField(r, w), apply: () => {} });
  // Any order: shuffled (map entries keep their effect order through `apply` running in write order).
  for (let i = ops.length - 1; i > 0; i--) {
    const j = int(r, i + 1);
    [ops[i], ops[j]] = [ops[j]!, ops[i]!];
  }
  return ops;
}

function replyOps(r: Rand, x: HopReply, seen: { unknowns: boolean }): ReplyOp[] {
  const ops: ReplyOp[] = [];
  const id = (n: number): ReplyOp => ({ write: (w) => w.tag(1, WireType.Varint).uint32(n), apply: (y) => void (y.id = n) });
  const output = (b: Uint8Array): ReplyOp => ({
    write: (w) => w.tag(2, WireType.LengthDelimited).bytes(b),
    apply: (y) => void (y.output = b),
  });
  const refused = (b: boolean): ReplyOp => ({
    write: (w) => w.tag(5, WireType.Varint).bool(b),
    apply: (y) => void (y.refused = b),
  });
  if (int(r, 3) === 0) ops.push(id(uint32(r)));
  if (x.id || int(r, 2)) ops.push(id(x.id));
  if (int(r, 3) === 0) ops.push(output(bytes(r)));
  if (x.output.length || int(r, 2)) ops.push(output(x.output));
  if (int(r, 3) === 0) ops.push(refused(int(r, 2) === 0));
  if (x.refused || int(r, 2)) ops.push(refused(x.refused));
  for (const [no, list] of [
    [3, x.headers],
    [4, x.trailers],
  ] as const) {
    for (const [k, v] of list) {
      let written: [string, string] = ["", ""];
      ops.push({
        write: (w) => void (written = writeEntry(r, w, no, k, v, seen)),
        apply: (y) => void (no === 3 ? y.headers : y.trailers).push(written),
      });
    }
  }
  for (let n = int(r, 4); n > 0; n--) ops.push({ write: (w) => unknownField(r, w), apply: () => {} });
  for (let i = ops.length - 1; i > 0; i--) {
    const j = int(r, i + 1);
    [ops[i], ops[j]] = [ops[j]!, ops[i]!];
  }
  return ops;
}

describe("decoding other writers' output", () => {
  it("calls: any field order, unknown fields of every wire type, scalars twice, partial map entries", () => {
    const r = mulberry32(21);
    for (let i = 0; i < 1500; i++) {
      const seen = { unknowns: false };
      const ops = callOps(r, randomCall(r), seen);
      const w = new BinaryWriter();
      const expected: HopCall = { id: 0, method: "", input: new Uint8Array(0), timeoutMs: 0, headers: {}, cancel: false };
      for (const op of ops) {
        op.write(w);
        op.apply(expected);
      }
      const body = w.finish();
      expect(callShape(decodeCall(body))).toEqual(callShape(expected));
      // protobuf-es 2.13's readMapEntry does not skip unknown fields inside a map entry (it reads their contents as
      // tags), so it is the reference only for entries without them.
      if (!seen.unknowns) expect(callShape(decodeCall(body))).toEqual(pbCall(body));
    }
  });

  it("replies: any field order, unknown fields of every wire type, scalars twice, partial metadata", () => {
    const r = mulberry32(22);
    for (let i = 0; i < 1500; i++) {
      const seen = { unknowns: false };
      const ops = replyOps(r, randomReply(r), seen);
      const w = new BinaryWriter();
      const expected: HopReply = { id: 0, output: new Uint8Array(0), headers: [], trailers: [], refused: false };
      for (const op of ops) {
        op.write(w);
        op.apply(expected);
      }
      const body = w.finish();
      expect(replyShape(decodeReply(body))).toEqual(replyShape(expected));
      expect(replyShape(decodeReply(body))).toEqual(pbReply(body));
    }
  });

  it("a map entry with no key, no value, or neither, reads as the empty string", () => {
    const w = new BinaryWriter();
    w.tag(5, WireType.LengthDelimited).fork().tag(2, WireType.LengthDelimited).string("only-value").join();
    w.tag(5, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string("only-key").join();
    const body = w.finish();
    expect(decodeCall(body).headers).toEqual({ "": "only-value", "only-key": "" });
    expect(pbCall(body).headers).toEqual({ "": "only-value", "only-key": "" });
    const w2 = new BinaryWriter();
    w2.tag(3, WireType.LengthDelimited).fork().join();
    w2.tag(4, WireType.LengthDelimited).fork().tag(2, WireType.LengthDelimited).string("v").join();
    w2.tag(4, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string("n").join();
    const body2 = w2.finish();
    expect(decodeReply(body2)).toMatchObject({ headers: [["", ""]], trailers: [["", "v"], ["n", ""]] });
    expect(replyShape(decodeReply(body2))).toEqual(pbReply(body2));
  });

  it("a scalar written twice: the last wins; uint32 fields keep the low 32 bits of a 64-bit varint", () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.Varint).uint32(5).tag(1, WireType.Varint).uint32(9);
    w.tag(4, WireType.Varint).uint64(2n ** 32n + 7n);
    w.tag(6, WireType.Varint).bool(true).tag(6, WireType.Varint).bool(false);
    w.tag(2, WireType.LengthDelimited).string("first").tag(2, WireType.LengthDelimited).string("second");
    const body = w.finish();
    expect(decodeCall(body)).toMatchObject({ id: 9, timeoutMs: 7, cancel: false, method: "second" });
    expect(callShape(decodeCall(body))).toEqual(pbCall(body));
  });

  it("a bool is true when any of its varint's 64 bits is set, not only the low 32", () => {
    for (const v of [1n, 2n, 2n ** 31n, 2n ** 32n, 2n ** 35n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 32n + 1n]) {
      const call = new BinaryWriter().tag(6, WireType.Varint).uint64(v).finish();
      expect(decodeCall(call).cancel, `cancel ${v}`).toBe(true);
      expect(fromBinary(ExchangeRequestSchema, call).cancel).toBe(true);
      const reply = new BinaryWriter().tag(5, WireType.Varint).uint64(v).finish();
      expect(decodeReply(reply).refused, `refused ${v}`).toBe(true);
      expect(fromBinary(ExchangeResponseSchema, reply).refused).toBe(true);
    }
    // Zero, in one byte or overlong (10 bytes), is false.
    for (const zero of ["3000", "30808080808080808000"]) {
      expect(decodeCall(Buffer.from(zero, "hex")).cancel).toBe(false);
      expect(fromBinary(ExchangeRequestSchema, Buffer.from(zero, "hex")).cancel).toBe(false);
    }
    expect(() => decodeCall(Buffer.from("30ffffffffffffffffff01", "hex"))).not.toThrow();
    expect(() => decodeCall(Buffer.from("30ffffffffffffffffffff01", "hex"))).toThrow();
    expect(() => decodeReply(Buffer.from("2880", "hex"))).toThrow();
  });

  it("a negative int32-style id (10-byte varint) keeps its low 32 bits, as protobuf-es reads it", () => {
    const w = new BinaryWriter();
    w.tag(1, WireType.Varint).int32(-1);
    const body = w.finish();
    expect(body.length).toBe(11);
    expect(decodeCall(body).id).toBe(2 ** 32 - 1);
    expect(decodeReply(body).id).toBe(2 ** 32 - 1);
    expect(pbCall(body).id).toBe(2 ** 32 - 1);
  });
});

/** The end offsets of a message's top-level fields (prefixes ending there are whole messages). */
function fieldEnds(body: Uint8Array): Set<number> {
  const ends = new Set<number>([0]);
  const rd = new BinaryReader(body);
  while (rd.pos < rd.len) {
    const [, wt] = rd.tag();
    rd.skip(wt);
    ends.add(rd.pos);
  }
  return ends;
}

describe("malformed input throws", () => {
  it("every proper prefix cutting inside a field (and whole-field prefixes decode as protobuf-es reads them)", () => {
    const r = mulberry32(31);
    for (let i = 0; i < 200; i++) {
      const call = randomCall(r);
      call.input = call.input.subarray(0, 40);
      const body = encodeCallFrame(call).subarray(5);
      const ends = fieldEnds(body);
      for (let n = 0; n < body.length; n++) {
        const prefix = body.subarray(0, n);
        if (ends.has(n)) expect(callShape(decodeCall(prefix))).toEqual(pbCall(prefix));
        else expect(() => decodeCall(prefix), `call prefix ${n} of ${hex(body)}`).toThrow();
      }
      const reply = randomReply(r);
      reply.output = reply.output.subarray(0, 40);
      const rbody = encodeReplyFrame(reply).subarray(5);
      const rends = fieldEnds(rbody);
      for (let n = 0; n < rbody.length; n++) {
        const prefix = rbody.subarray(0, n);
        if (rends.has(n)) expect(replyShape(decodeReply(prefix))).toEqual(pbReply(prefix));
        else expect(() => decodeReply(prefix), `reply prefix ${n} of ${hex(rbody)}`).toThrow();
      }
    }
  });

  const both = (hexBytes: string) => {
    const b = Buffer.from(hexBytes, "hex");
    expect(() => decodeCall(b), `decodeCall ${hexBytes}`).toThrow();
    expect(() => decodeReply(b), `decodeReply ${hexBytes}`).toThrow();
    expect(() => decodeCall(new Uint8Array(b)), `decodeCall (Uint8Array) ${hexBytes}`).toThrow();
    expect(() => decodeReply(new Uint8Array(b)), `decodeReply (Uint8Array) ${hexBytes}`).toThrow();
  };
  /** `inner` as the body of a call's map entry, a reply's header and a reply's trailer. */
  const inEntry = (inner: string) => {
    const len = (inner.length / 2).toString(16).padStart(2, "0");
    expect(() => decodeCall(Buffer.from(`2a${len}${inner}`, "hex")), `call entry ${inner}`).toThrow();
    expect(() => decodeReply(Buffer.from(`1a${len}${inner}`, "hex")), `reply header ${inner}`).toThrow();
    expect(() => decodeReply(Buffer.from(`22${len}${inner}`, "hex")), `reply trailer ${inner}`).toThrow();
  };

  it("a length running past the end, at the top level and inside an entry", () => {
    both("1a05010203"); // call input / reply headers: 5 bytes announced, 3 there
    both("12ffffffff0f00"); // a 4 GiB length
    both("2a050a0561"); // an entry of 5 announced, 3 there
    inEntry("0a05"); // a key (name) running past its entry's end, which is the message's end
    inEntry("1205"); // a value likewise
    for (const tag of ["2a", "1a", "22"]) both(`${tag}030a05616161`); // a key running past its entry, within the message
    inEntry("1a05"); // an unknown length-delimited field in an entry
    inEntry("0901"); // an unknown 64-bit field in an entry, cut short
    inEntry("0d01"); // an unknown 32-bit field in an entry, cut short
    both("0a05"); // field 1 with wire type 2 (skipped), past the end
    both("3a80"); // unknown length-delimited field with a truncated length
    both("79010203"); // unknown 64-bit field cut short
    both("7d0102"); // unknown 32-bit field cut short
  });

  it("a length of 2^32 or more (not read modulo 2^32: protobuf-es 2.13 would read 2^32 + 1 as 1)", () => {
    for (const len of ["8180808010", "81808080f0ffffffff01", "8180808080808080808001"]) {
      both("1a" + len + "00"); // call input / reply headers
      both("12" + len + "00"); // call method / reply output
      both("7a" + len + "00"); // an unknown length-delimited field
      inEntry("0a" + len + "00"); // a key or name
      inEntry("3a" + len + "00"); // an unknown field in an entry
    }
    // Lengths written in more bytes than needed but below 2^32 still read.
    expect(hex(decodeCall(Buffer.from("1a818080800041", "hex")).input)).toBe("41");
    expect(decodeReply(Buffer.from("22808000", "hex")).trailers).toEqual([["", ""]]);
  });

  it("an overlong varint (11 bytes) in a value, a tag, a length and an unknown field", () => {
    const eleven = "ffffffffffffffffffff01";
    both("08" + eleven);
    both(eleven);
    both("12" + eleven);
    both("78" + eleven);
    inEntry("08" + eleven); // inside an entry: a varint field skipped
    inEntry(eleven); // a tag inside an entry
    inEntry("0a" + eleven); // a length inside an entry
  });

  it("a tag of 2^32 or more (not read modulo 2^32 as another field's tag), at the top level and in an entry", () => {
    // 8 + 2^32 and 0x2a + 2^35: read modulo 2^32 they would be field 1 (id) and field 5 (a call's headers).
    for (const tag of ["8880808010", "aa80808080010a", "88808080808080808001"]) {
      both(tag + "01");
      inEntry(tag + "01");
    }
    expect(() => fromBinary(ExchangeRequestSchema, Buffer.from("888080801001", "hex"))).toThrow();
    // A tag written in more bytes than needed, below 2^32, still reads.
    expect(decodeCall(Buffer.from("88800005", "hex")).id).toBe(5);
  });

  it("field number 0, at the top level", () => {
    for (const f of ["0000", "010000000000000000", "0200", "0500000000"]) {
      both(f);
      both("0801" + f); // after a valid field
    }
  });

  it("field number 0 inside a map entry or Metadata message", () => {
    for (const f of ["0000", "010000000000000000", "0200", "0500000000"]) {
      inEntry(f);
      inEntry("0a016b" + f); // after the key
      inEntry(f + "120176"); // before the value
    }
    // protobuf-es refuses it there too.
    expect(() => fromBinary(ExchangeRequestSchema, Buffer.from("2a020000", "hex"))).toThrow();
    expect(() => fromBinary(ExchangeResponseSchema, Buffer.from("1a020000", "hex"))).toThrow();
  });

  it("wire types 3, 4, 6 and 7, at the top level (known and unknown numbers) and inside an entry", () => {
    for (const wt of [3, 4, 6, 7]) {
      for (const no of [1, 2, 3, 5, 9, 100]) {
        const w = new BinaryWriter();
        w.uint32((no << 3) | wt);
        w.raw(new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 0]));
        both(hex(w.finish()));
      }
      for (const tag of [0x08 | wt, 0x10 | wt, 0x18 | wt]) inEntry(`${tag.toString(16).padStart(2, "0")}0000000000000000`);
    }
  });

  it("generated garbage: decode never hangs, and either throws or agrees with fromBinary", () => {
    const r = mulberry32(41);
    for (let i = 0; i < 3000; i++) {
      const b = new Uint8Array(int(r, 24));
      for (let j = 0; j < b.length; j++) b[j] = int(r, 4) === 0 ? pick(r, [0x08, 0x0a, 0x12, 0x2a, 0x80, 0xff, 0]) : int(r, 256);
      let pb: ReturnType<typeof pbCall> | undefined;
      try {
        pb = pbCall(b);
      } catch {
        pb = undefined;
      }
      let ours: ReturnType<typeof pbCall> | undefined;
      try {
        ours = callShape(decodeCall(b));
      } catch {
        ours = undefined;
      }
      // Where both read the bytes they must agree (protobuf-es also skips groups, which the codec refuses; it would
      // also read a known field sent under another wire type, which the codec skips: none in this seed's inputs).
      if (ours && pb) expect(ours, hex(b)).toEqual(pb);
    }
  });
});

describe("byte views", () => {
  const call: HopCall = {
    id: 300,
    method: "/a.B/C",
    input: Uint8Array.of(1, 2, 3),
    timeoutMs: 1500,
    headers: { authorization: "Bearer x", "x-é": "ü😀" },
    cancel: false,
  };
  const reply: HopReply = {
    id: 300,
    output: Uint8Array.of(4, 5),
    headers: [["content-type", "application/grpc"]],
    trailers: [["grpc-status", "0"], ["x-dup", "1"], ["x-dup", "2"]],
    refused: true,
  };

  it("a plain Uint8Array (not a Buffer)", () => {
    const body = new Uint8Array(encodeCallFrame(call).subarray(5));
    expect(Buffer.isBuffer(body)).toBe(false);
    const got = decodeCall(body);
    expect(callShape(got)).toEqual(callShape(call));
    expect(got.input.buffer).toBe(body.buffer);
    const rbody = new Uint8Array(encodeReplyFrame(reply).subarray(5));
    const rgot = decodeReply(rbody);
    expect(replyShape(rgot)).toEqual(replyShape(reply));
    expect(rgot.output.buffer).toBe(rbody.buffer);
  });

  it("a plain Uint8Array at a non-zero offset into a larger ArrayBuffer", () => {
    const body = encodeCallFrame(call).subarray(5);
    const big = new Uint8Array(body.length + 64).fill(0xff);
    big.set(body, 31);
    const view = big.subarray(31, 31 + body.length);
    expect(callShape(decodeCall(view))).toEqual(callShape(call));
  });

  it("a Buffer slice with a non-zero byteOffset into a larger ArrayBuffer, garbage on both sides", () => {
    const frame = encodeCallFrame(call);
    const big = Buffer.alloc(frame.length + 100, 0xff);
    frame.copy(big, 37);
    const slice = big.subarray(37 + 5, 37 + frame.length);
    expect(slice.byteOffset).toBeGreaterThan(0);
    const got = decodeCall(slice);
    expect(callShape(got)).toEqual(callShape(call));
    expect(got.input.buffer).toBe(big.buffer);
    expect(got.input.byteOffset).toBe(slice.byteOffset + slice.indexOf(Buffer.from([1, 2, 3])));

    const rframe = encodeReplyFrame(reply);
    const rbig = Buffer.alloc(rframe.length + 100, 0x0a);
    rframe.copy(rbig, 50);
    const rslice = rbig.subarray(50 + 5, 50 + rframe.length);
    expect(replyShape(decodeReply(rslice))).toEqual(replyShape(reply));
    // A slice cut one byte short must throw, not read past its end into the larger buffer.
    expect(() => decodeReply(rbig.subarray(50 + 5, 50 + rframe.length - 1))).toThrow();
    expect(() => decodeCall(big.subarray(37 + 5, 37 + frame.length - 1))).toThrow();
  });
});
