/**
 * Binary protobuf for the split hop's flat messages, derived from their descriptors (protobuf-es `DescMessage`), with
 * protobuf-es's own `toBinary` / `fromBinary` for anything else. The chat messages the gateway and the core exchange on
 * every call (`body_json` + `json_text` in, `completion_json` / `chunk_json` + timing out) are a few strings, a bool and
 * a double; protobuf-es reads and writes every message through its reflection layer (`reflect()` and a
 * `ReflectMessageImpl` per message, a zero message made field by field, a `BinaryWriter` of chunks copied together at
 * `finish`, a `TextEncoder` result per string): ≈ 9 % of the hop's CPU, both ends (bench/README.md, "The split hop's
 * codec and call objects").
 *
 * Handled here, per field of the message (from its descriptor): singular `string`, `bool` and `double` fields with
 * implicit presence (proto3, not `optional`, not in a oneof), `repeated string`, and a repeated message field whose
 * message has only fields of those kinds (the dialects' streamed events, `{type, data_json}`: packed dozens to a
 * message, protobuf-es's reflection per event was most of the hop's cost per event). Encoding falls back to `toBinary`
 * when any other field is set (a Struct `body`, a nested message, an int64, …) or the message carries unknown fields, or a
 * value has the wrong type (toBinary's error then); decoding falls back to `fromBinary` at the first field it does not
 * handle (another field kind, an unknown field number, a wire type that does not match, invalid UTF-8 or a leading
 * byte-order mark in a string (which protobuf-es's TextDecoder drops), a
 * truncated message: fromBinary's result or error then). Output is the same bytes as `toBinary` (fields by number,
 * zero values left out, -0 written) and the same message as `fromBinary` (own properties in the same order); checked
 * for every message of the generated services in test/unit/lib/proto-codec.test.ts.
 */
import { isUtf8 } from "node:buffer";
import { create, fromBinary, ScalarType, toBinary, type DescField, type DescMessage } from "@bufbuild/protobuf";

export interface MessageCodec {
  /**
   * A message of the schema, or an init object of it (what `create(schema, init)` accepts), as protobuf binary, in a
   * Buffer with `headroom` bytes (not filled) before it (for a frame's header without a copy).
   */
  encode(message: object, headroom?: number): Buffer;
  /** A message of the schema from protobuf binary (throws as `fromBinary` does). */
  decode(bytes: Uint8Array): object;
  /** How many encodes and decodes went to protobuf-es (for tests). */
  readonly fallbacks: number;
}

const IMPLICIT = 2; // google.protobuf.FeatureSet.FieldPresence.IMPLICIT

/** How a handled field is written and read. */
const enum Kind {
  String,
  Bool,
  Double,
  StringList,
  /** A repeated message of flat fields (the kinds above). */
  MessageList,
}

interface Slot {
  readonly name: string;
  readonly kind: Kind;
  /** The field's tag as one varint (field number and wire type). */
  readonly tag: number;
  readonly tagBytes: number;
  /** MessageList: the item message's fields. */
  readonly item?: Flat;
}

/** A message whose fields are all handled kinds but MessageList: its slots, and its zero message's copy. */
interface Flat {
  readonly typeName: string;
  readonly slots: readonly Slot[];
  readonly byNumber: Map<number, Slot>;
  readonly fresh: () => Record<string, unknown>;
}

function kindOf(field: DescField): Kind | undefined {
  if (field.oneof) return undefined;
  if (field.fieldKind === "list" && field.listKind === "message") return flatOf(field.message) ? Kind.MessageList : undefined;
  if (field.fieldKind === "scalar" && field.presence === IMPLICIT) {
    if (field.scalar === ScalarType.STRING) return Kind.String;
    if (field.scalar === ScalarType.BOOL) return Kind.Bool;
    if (field.scalar === ScalarType.DOUBLE) return Kind.Double;
    return undefined;
  }
  if (field.fieldKind === "list" && field.listKind === "scalar" && field.scalar === ScalarType.STRING) return Kind.StringList;
  return undefined;
}

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LEN = 2;

const flats = new WeakMap<DescMessage, Flat | null>();

/** The flat description of `schema` when all its fields are singular or `repeated string` kinds handled here, else undefined. */
function flatOf(schema: DescMessage): Flat | undefined {
  let flat = flats.get(schema);
  if (flat === undefined) {
    flat = null;
    flats.set(schema, null); // a message that contains itself is not flat (and is not asked about again meanwhile)
    const ok = schema.oneofs.length === 0 && schema.fields.every((f) => {
      const k = kindOf(f);
      return k !== undefined && k !== Kind.MessageList;
    });
    if (ok) {
      const fields = [...schema.fields].sort((a, b) => a.number - b.number);
      const slots = fields.map((f) => slotOf(f, kindOf(f)!));
      const zero = create(schema) as unknown as Record<string, unknown>;
      const lists = schema.fields.filter((f) => f.fieldKind === "list").map((f) => f.localName);
      flat = {
        typeName: schema.typeName,
        slots,
        byNumber: new Map(slots.map((slot, i) => [fields[i]!.number, slot])),
        fresh: () => {
          const msg = { ...zero };
          for (const k of lists) msg[k] = [];
          return msg;
        },
      };
    }
    flats.set(schema, flat);
  }
  return flat ?? undefined;
}

function slotOf(f: DescField, kind: Kind): Slot {
  const tag = ((f.number << 3) | wireOf(kind)) >>> 0;
  return { name: f.localName, kind, tag, tagBytes: varintSize(tag), ...(kind === Kind.MessageList ? { item: flatOf(f.message!)! } : {}) };
}

function wireOf(kind: Kind): number {
  return kind === Kind.Bool ? WIRE_VARINT : kind === Kind.Double ? WIRE_FIXED64 : WIRE_LEN;
}

function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

function writeVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[pos++] = n;
  return pos;
}

const codecs = new WeakMap<DescMessage, MessageCodec>();

/** The codec of `schema` (made once per schema). */
export function codecOf(schema: DescMessage): MessageCodec {
  let codec = codecs.get(schema);
  if (!codec) codecs.set(schema, (codec = makeCodec(schema)));
  return codec;
}

/** Thrown inside `decode` when the bytes need protobuf-es (never escapes). */
const FALLBACK = Symbol("fallback");

function makeCodec(schema: DescMessage): MessageCodec {
  const fields = [...schema.fields].sort((a, b) => a.number - b.number);
  const slots: Slot[] = [];
  /** Fields of other kinds: encoding falls back when one is set. */
  const others: DescField[] = [];
  const byNumber = new Map<number, Slot>();
  for (const f of fields) {
    const kind = kindOf(f);
    if (kind === undefined) {
      others.push(f);
      continue;
    }
    const slot = slotOf(f, kind);
    slots.push(slot);
    byNumber.set(f.number, slot);
  }
  // protobuf-es's zero message: `$typeName`, then every implicit-presence field and every oneof, in member order
  // (message fields and explicit-presence fields are absent until set). Copied per decode; lists replaced.
  // Its mutable members (lists, maps, oneofs) made anew for each message.
  const zero = create(schema) as unknown as Record<string, unknown>;
  const listNames = schema.fields.filter((f) => !f.oneof && f.fieldKind === "list").map((f) => f.localName);
  const mapNames = schema.fields.filter((f) => !f.oneof && f.fieldKind === "map").map((f) => f.localName);
  const oneofNames = schema.oneofs.map((o) => o.localName);
  // An implicit `bytes` field's zero value, an empty Uint8Array, is an object too (one per message, as protobuf-es's).
  const bytesNames = schema.fields.filter((f) => !f.oneof && f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES && f.presence === IMPLICIT).map((f) => f.localName);
  const fresh = (): Record<string, unknown> => {
    const msg = { ...zero };
    for (const k of bytesNames) msg[k] = new Uint8Array(0);
    for (const k of listNames) msg[k] = [];
    for (const k of mapNames) msg[k] = {};
    for (const k of oneofNames) msg[k] = { case: undefined };
    return msg;
  };
  const typeName = schema.typeName;

  let fallbacks = 0;
  const fallbackEncode = (message: object, headroom: number): Buffer => {
    fallbacks++;
    const bytes = toBinary(schema, create(schema, message as never));
    if (headroom === 0) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const out = Buffer.allocUnsafe(headroom + bytes.byteLength);
    out.set(bytes, headroom);
    return out;
  };

  /** Whether a field the codec does not write is set on `message` (a message or an init object). */
  const otherSet = (message: Record<string, unknown>): boolean => {
    for (const f of others) {
      const v = f.oneof ? message[f.oneof.localName] : message[f.localName];
      if (v === undefined || v === null) continue;
      if (f.oneof) {
        if ((v as { case?: unknown }).case !== undefined) return true;
        continue;
      }
      if (f.fieldKind === "scalar") {
        if (f.presence !== IMPLICIT) return true;
        // As protobuf-es's isScalarZeroValue: bytes empty, float +0 only (-0 is set), other numbers loosely 0 (0, 0n, "0").
        const zero = f.scalar === ScalarType.BYTES ? v instanceof Uint8Array && v.byteLength === 0 : f.scalar === ScalarType.FLOAT ? Object.is(v, 0) : v == 0; // eslint-disable-line eqeqeq
        if (!zero) return true;
        continue;
      }
      if (f.fieldKind === "enum") {
        if (f.presence !== IMPLICIT || v !== f.enum.values[0]!.number) return true;
        continue;
      }
      if (f.fieldKind === "list") {
        if ((v as unknown[]).length > 0) return true;
        continue;
      }
      if (f.fieldKind === "map") {
        if (Object.keys(v as object).length > 0) return true;
        continue;
      }
      return true; // a message field
    }
    return false;
  };

  return {
    get fallbacks() {
      return fallbacks;
    },

    encode(input: object, headroom = 0): Buffer {
      const message = input as Record<string, unknown>;
      if (message.$typeName !== undefined && message.$typeName !== typeName) return fallbackEncode(input, headroom);
      if ((message.$unknown as unknown[] | undefined)?.length || (others.length > 0 && otherSet(message))) return fallbackEncode(input, headroom);
      // Sizes first (the items' of a MessageList kept in `sizes`), then one buffer.
      const sizes: number[] = [];
      const size = sizeOf(message, slots, sizes);
      if (size < 0) return fallbackEncode(input, headroom);
      const buf = Buffer.allocUnsafe(headroom + size);
      writeFlat(buf, headroom, message, slots, sizes, { at: 0 });
      return buf;
    },

    decode(bytes: Uint8Array): object {
      const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      try {
        return decodeFlat(buf, byNumber, fresh());
      } catch (e) {
        if (e !== FALLBACK) throw e;
        fallbacks++;
        return fromBinary(schema, bytes);
      }
    },
  };
}

/**
 * The encoded size of `message`'s handled fields, or -1 when a value has the wrong type or an item of a MessageList is
 * not a plain message of its type (another `$typeName`, unknown fields): encoding falls back then. The size of each
 * MessageList item is pushed to `sizes`, in the order `writeFlat` writes them.
 */
function sizeOf(message: Record<string, unknown>, slots: readonly Slot[], sizes: number[]): number {
  let size = 0;
  for (const s of slots) {
    const v = message[s.name];
    if (v === undefined || v === null) continue;
    switch (s.kind) {
      case Kind.String:
        if (typeof v !== "string") return -1;
        if (v !== "") {
          const n = Buffer.byteLength(v, "utf8");
          size += s.tagBytes + varintSize(n) + n;
        }
        break;
      case Kind.Bool:
        if (typeof v !== "boolean") return -1;
        if (v) size += s.tagBytes + 1;
        break;
      case Kind.Double:
        if (typeof v !== "number") return -1;
        if (!Object.is(v, 0)) size += s.tagBytes + 8;
        break;
      case Kind.StringList:
        if (!Array.isArray(v)) return -1;
        for (const item of v) {
          if (typeof item !== "string") return -1;
          const n = Buffer.byteLength(item, "utf8");
          size += s.tagBytes + varintSize(n) + n;
        }
        break;
      case Kind.MessageList: {
        if (!Array.isArray(v)) return -1;
        const flat = s.item!;
        for (const item of v) {
          if (typeof item !== "object" || item === null) return -1;
          const m = item as Record<string, unknown>;
          if ((m.$typeName !== undefined && m.$typeName !== flat.typeName) || (m.$unknown as unknown[] | undefined)?.length) return -1;
          const at = sizes.length;
          sizes.push(0);
          const n = sizeOf(m, flat.slots, sizes);
          if (n < 0) return -1;
          sizes[at] = n;
          size += s.tagBytes + varintSize(n) + n;
        }
        break;
      }
    }
  }
  return size;
}

/** Writes what `sizeOf` measured (`sizes` read from `next.at` on); returns the position after it. */
function writeFlat(buf: Buffer, pos: number, message: Record<string, unknown>, slots: readonly Slot[], sizes: number[], next: { at: number }): number {
  for (const s of slots) {
    const v = message[s.name];
    if (v === undefined || v === null) continue;
    switch (s.kind) {
      case Kind.String:
        if (v !== "") {
          pos = writeVarint(buf, pos, s.tag);
          const n = Buffer.byteLength(v as string, "utf8");
          pos = writeVarint(buf, pos, n);
          pos += buf.write(v as string, pos, n, "utf8");
        }
        break;
      case Kind.Bool:
        if (v) {
          pos = writeVarint(buf, pos, s.tag);
          buf[pos++] = 1;
        }
        break;
      case Kind.Double:
        if (!Object.is(v, 0)) {
          pos = writeVarint(buf, pos, s.tag);
          pos = buf.writeDoubleLE(v as number, pos);
        }
        break;
      case Kind.StringList:
        for (const item of v as string[]) {
          pos = writeVarint(buf, pos, s.tag);
          const n = Buffer.byteLength(item, "utf8");
          pos = writeVarint(buf, pos, n);
          pos += buf.write(item, pos, n, "utf8");
        }
        break;
      case Kind.MessageList:
        for (const item of v as Array<Record<string, unknown>>) {
          pos = writeVarint(buf, pos, s.tag);
          pos = writeVarint(buf, pos, sizes[next.at++]!);
          pos = writeFlat(buf, pos, item, s.item!.slots, sizes, next);
        }
        break;
    }
  }
  return pos;
}

/** A varint of at most 32 bits (tags, lengths), or FALLBACK. */
function readVarint32(buf: Buffer, at: { pos: number }): number {
  let pos = at.pos;
  let result = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (pos >= buf.length) throw FALLBACK;
    const b = buf[pos++]!;
    result += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) {
      at.pos = pos;
      if (result > 0xffffffff) throw FALLBACK;
      return result;
    }
  }
  throw FALLBACK;
}

function decodeFlat(buf: Buffer, byNumber: Map<number, Slot>, msg: Record<string, unknown>): object {
  const at = { pos: 0 };
  const end = buf.length;
  while (at.pos < end) {
    const tag = readVarint32(buf, at);
    const slot = byNumber.get(tag >>> 3);
    if (!slot || slot.tag !== tag) throw FALLBACK;
    switch (slot.kind) {
      case Kind.MessageList: {
        const n = readVarint32(buf, at);
        const from = at.pos;
        const to = from + n;
        if (to > end) throw FALLBACK;
        const item = slot.item!;
        (msg[slot.name] as unknown[]).push(decodeFlat(buf.subarray(from, to), item.byNumber, item.fresh()));
        at.pos = to;
        break;
      }
      case Kind.String:
      case Kind.StringList: {
        const n = readVarint32(buf, at);
        const from = at.pos;
        const to = from + n;
        if (to > end) throw FALLBACK;
        // Invalid UTF-8 (an error with validation, U+FFFD without) and a leading byte-order mark (which protobuf-es's
        // TextDecoder drops) are left to protobuf-es.
        if (n >= 3 && buf[from] === 0xef && buf[from + 1] === 0xbb && buf[from + 2] === 0xbf) throw FALLBACK;
        if (!isUtf8(buf.subarray(from, to))) throw FALLBACK;
        const text = buf.toString("utf8", from, to);
        at.pos = to;
        if (slot.kind === Kind.String) msg[slot.name] = text;
        else (msg[slot.name] as string[]).push(text);
        break;
      }
      case Kind.Bool: {
        // protobuf-es reads a bool as a varint of up to 64 bits, true when not zero.
        let nonZero = false;
        for (let i = 0; ; i++) {
          if (i >= 10 || at.pos >= end) throw FALLBACK;
          const b = buf[at.pos++]!;
          if (b & 0x7f) nonZero = true;
          if (b < 0x80) break;
        }
        msg[slot.name] = nonZero;
        break;
      }
      case Kind.Double:
        if (at.pos + 8 > end) throw FALLBACK;
        msg[slot.name] = buf.readDoubleLE(at.pos);
        at.pos += 8;
        break;
    }
  }
  return msg;
}
