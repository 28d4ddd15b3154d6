/**
 * OTLP/protobuf encoding of ended spans (an `ExportTraceServiceRequest`, opentelemetry-proto `trace/v1`), for the
 * span processor src/lib/tracing.ts installs (tracing on, `http/protobuf`; src/lib/otlp-span-processor.ts): each span
 * encoded as it ends ({@link EncodedSpans}), a batch's spans sent as one request by the SDK's own HTTP export delegate
 * (retries, timeouts, headers, compression, the response's partial success).
 *
 * Same bytes as `@opentelemetry/otlp-transformer`'s `ProtobufTraceSerializer` for the same spans (same fields, same
 * order, same grouping by resource then instrumentation scope; test/unit/otlp-trace-encoder.test.ts compares them),
 * made with less work per span (bench/README.md, "Tracing cost: a span encoder of our own"):
 * - one pass (the SDK's first sizes the whole request, then writes it into a new buffer): a span straight into its
 *   batch's bytes, the request around them into a buffer kept between exports; a nested message reserves one byte for
 *   its length and moves its bytes along when longer than 127;
 * - each attribute key's bytes (tag, length, UTF-8) made once and copied after that (a span's keys are Portico's
 *   own few dozen names), the resource's and the scope's message made once per resource and scope object;
 * - trace and span ids written from their hex straight into the buffer (no array per id).
 */
import type { AttributeValue, HrTime, Link, SpanContext } from "@opentelemetry/api";
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base";

type Resource = ReadableSpan["resource"];
type Scope = ReadableSpan["instrumentationScope"];

let buf: Buffer = Buffer.allocUnsafe(64 * 1024);
let pos = 0;

function ensure(n: number): void {
  if (pos + n <= buf.length) return;
  let size = buf.length * 2;
  while (size < pos + n) size *= 2;
  const next = Buffer.allocUnsafe(size);
  buf.copy(next, 0, 0, pos);
  buf = next;
}

function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** An unsigned 32-bit varint (tags, lengths, counts, enums). */
function u32(v: number): void {
  ensure(5);
  v >>>= 0;
  while (v > 0x7f) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
}

/** An int64 varint from an integer number (two's complement when negative, as the SDK's writer). */
function i64(value: number): void {
  if (value >= 0 && value <= 0xffffffff) return u32(value);
  ensure(10);
  const abs = Math.abs(value);
  let low = abs >>> 0;
  let high = (abs / 0x100000000) >>> 0;
  if (value < 0) {
    low = ~low >>> 0;
    high = ~high >>> 0;
    low = (low + 1) >>> 0;
    if (low === 0) high = (high + 1) >>> 0;
  }
  while (high > 0 || low > 0x7f) {
    buf[pos++] = (low & 0x7f) | 0x80;
    low = ((low >>> 7) | (high << 25)) >>> 0;
    high >>>= 7;
  }
  buf[pos++] = low & 0x7f;
}

/** `v`'s low 32 bits, little-endian, byte by byte (cheaper than a call into Buffer's checked writers; room already ensured). */
function le32(v: number): void {
  buf[pos] = v;
  buf[pos + 1] = v >>> 8;
  buf[pos + 2] = v >>> 16;
  buf[pos + 3] = v >>> 24;
  pos += 4;
}

/** `b`'s bytes (room already ensured): a loop, for a few dozen bytes cheaper than a call into `set`. */
function put(b: Buffer): void {
  const n = b.length;
  for (let i = 0; i < n; i++) buf[pos + i] = b[i]!;
  pos += n;
}

function fixed32(v: number): void {
  ensure(4);
  le32(v);
}

/** `[seconds, nanoseconds]` as fixed64 nanoseconds since the epoch. `seconds * 1953125` is exact (< 2^53) and `* 512` makes it nanoseconds. */
function time(t: HrTime): void {
  ensure(8);
  const q = t[0] * 1953125;
  const qHigh = Math.floor(q / 0x800000);
  let low = (q - qHigh * 0x800000) * 512 + t[1];
  let high = qHigh;
  if (low >= 0x100000000) {
    low -= 0x100000000;
    high += 1;
  }
  le32(low);
  le32(high);
}

/** Reserves one byte for the length of the message that follows; returns where. */
function begin(): number {
  ensure(1);
  return pos++;
}

/** Writes the length of the message begun at `at`, moving it along when its length takes more than one byte. */
function end(at: number): void {
  const len = pos - at - 1;
  if (len < 0x80) {
    buf[at] = len;
    return;
  }
  const n = varintSize(len);
  ensure(n - 1);
  buf.copyWithin(at + n, at + 1, pos);
  pos += n - 1;
  let v = len;
  let p = at;
  while (v > 0x7f) {
    buf[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[p] = v;
}

/** A string's length and UTF-8 bytes. */
function str(s: string): void {
  const n = s.length;
  ensure(n * 3 + 5);
  if (n < 0x80) {
    // ASCII (the usual case): its length is its byte count and fits one byte.
    const at = pos + 1;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) break;
      buf[at + i] = c;
    }
    if (i === n) {
      buf[pos] = n;
      pos = at + n;
      return;
    }
  }
  const bytes = Buffer.byteLength(s, "utf8");
  u32(bytes);
  pos += buf.write(s, pos, bytes, "utf8");
}

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = HEX[65 + i] = 10 + i;

/** An id given in hex as its bytes (length-delimited). */
function hexBytes(h: string): void {
  const n = h.length >>> 1;
  ensure(n + 1);
  buf[pos++] = n;
  for (let i = 0; i < n; i++) buf[pos++] = (HEX[h.charCodeAt(2 * i)]! << 4) | HEX[h.charCodeAt(2 * i + 1)]!;
}

/** Each attribute key's `KeyValue.key` field (tag, length, UTF-8), made once; bounded (keys come from code, but still). */
const keys = new Map<string, Buffer>();
const MAX_KEYS = 4096;

/** `k`'s `KeyValue.key` field as bytes, made once (undefined past {@link MAX_KEYS} keys: then written each time). */
function keyBytes(k: string): Buffer | undefined {
  let b = keys.get(k);
  if (b === undefined && keys.size < MAX_KEYS) {
    const scratch = buf;
    const at = pos;
    buf = Buffer.allocUnsafe(k.length * 3 + 6);
    pos = 0;
    buf[pos++] = 0x0a;
    str(k);
    b = Buffer.from(buf.subarray(0, pos));
    buf = scratch;
    pos = at;
    keys.set(k, b);
  }
  return b;
}

function key(k: string, b: Buffer | undefined): void {
  if (b === undefined) {
    ensure(1);
    buf[pos++] = 0x0a;
    str(k);
    return;
  }
  ensure(b.length);
  put(b);
}

const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;

function anyValue(value: unknown): void {
  switch (typeof value) {
    case "string":
      ensure(1);
      buf[pos++] = 0x0a;
      str(value);
      return;
    case "boolean":
      ensure(2);
      buf[pos++] = 0x10;
      buf[pos++] = value ? 1 : 0;
      return;
    case "number":
      if (Number.isInteger(value) && value >= MIN_INT64 && value < MAX_INT64) {
        ensure(1);
        buf[pos++] = 0x18;
        i64(value);
      } else {
        ensure(9);
        buf[pos++] = 0x21;
        buf.writeDoubleLE(value, pos);
        pos += 8;
      }
      return;
  }
  if (value instanceof Uint8Array) {
    u32(0x3a);
    u32(value.length);
    ensure(value.length);
    buf.set(value, pos);
    pos += value.length;
  } else if (Array.isArray(value)) {
    u32(0x2a);
    const at = begin();
    for (const item of value) {
      u32(0x0a);
      const itemAt = begin();
      anyValue(item);
      end(itemAt);
    }
    end(at);
  } else if (typeof value === "object" && value !== null) {
    u32(0x32);
    const at = begin();
    const obj = value as Record<string, unknown>;
    for (const k in obj) {
      if (!Object.prototype.hasOwnProperty.call(obj, k)) continue;
      u32(0x0a);
      const kvAt = begin();
      u32(0x0a);
      str(k);
      u32(0x12);
      const vAt = begin();
      anyValue(obj[k]);
      end(vAt);
      end(kvAt);
    }
    end(at);
  }
  // Anything else: an empty value, as the SDK's serializer.
}

/** `attributes` as repeated `KeyValue` in field `field`. */
function attributes(attrs: Record<string, AttributeValue | undefined>, field: number): void {
  const tag = (field << 3) | 2;
  for (const k in attrs) {
    if (!Object.prototype.hasOwnProperty.call(attrs, k)) continue;
    const v = attrs[k];
    const kb = keyBytes(k);
    // The usual values (a short ASCII string, a small non-negative integer, a boolean) with their lengths known
    // beforehand: written straight, no nested message moved. Else (or a non-ASCII string found) the general way.
    if (kb !== undefined) {
      if (typeof v === "string") {
        if (shortAscii(tag, kb, v)) continue;
      } else if (typeof v === "number") {
        if (smallInt(tag, kb, v)) continue;
      } else if (typeof v === "boolean" && kb.length < 0x7c) {
        const n = kb.length;
        ensure(n + 6);
        buf[pos++] = tag;
        buf[pos++] = n + 4;
        put(kb);
        buf[pos++] = 0x12;
        buf[pos++] = 2;
        buf[pos++] = 0x10;
        buf[pos++] = v ? 1 : 0;
        continue;
      }
    }
    u32(tag);
    const at = begin();
    key(k, kb);
    ensure(1);
    buf[pos++] = 0x12;
    const vAt = begin();
    anyValue(v);
    end(vAt);
    end(at);
  }
}

/**
 * A `KeyValue` whose value is the string `v`, when its whole message is under 128 bytes and `v` is ASCII (each
 * length one byte, known beforehand); false (nothing written) otherwise.
 */
function shortAscii(tag: number, kb: Buffer, v: string): boolean {
  const n = v.length;
  const kn = kb.length;
  // key, value tag and length, string tag and length, the string
  const len = kn + 4 + n;
  if (len >= 0x80) return false;
  ensure(len + 2);
  const at = pos + 2 + kn + 4;
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i);
    if (c > 0x7f) return false;
    buf[at + i] = c;
  }
  buf[pos++] = tag;
  buf[pos++] = len;
  put(kb);
  buf[pos++] = 0x12;
  buf[pos++] = n + 2;
  buf[pos++] = 0x0a;
  buf[pos++] = n;
  pos += n;
  return true;
}

/** A `KeyValue` whose value is the integer `v` when 0 ≤ v < 2^28 (its varint at most four bytes); false (nothing written) otherwise. */
function smallInt(tag: number, kb: Buffer, v: number): boolean {
  if (!(v >= 0 && v < 0x10000000) || !Number.isInteger(v)) return false;
  const kn = kb.length;
  const vn = varintSize(v);
  if (kn + 3 + vn >= 0x80) return false;
  ensure(kn + vn + 5);
  buf[pos++] = tag;
  buf[pos++] = kn + 3 + vn;
  put(kb);
  buf[pos++] = 0x12;
  buf[pos++] = 1 + vn;
  buf[pos++] = 0x18;
  while (v > 0x7f) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
  return true;
}

/** The span's `flags`: the W3C trace flags, and whether the parent is remote (known). */
function flags(traceFlags: number, isRemote: boolean | undefined): number {
  return (traceFlags & 0xff) | 0x100 | (isRemote ? 0x200 : 0);
}

function event(e: TimedEvent): void {
  u32(0x5a);
  const at = begin();
  u32(0x09);
  time(e.time);
  u32(0x12);
  str(e.name);
  if (e.attributes) attributes(e.attributes, 3);
  u32(0x20);
  u32(e.droppedAttributesCount || 0);
  end(at);
}

function link(l: Link & { droppedAttributesCount?: number }): void {
  u32(0x6a);
  const at = begin();
  const c = l.context;
  u32(0x0a);
  hexBytes(c.traceId);
  u32(0x12);
  hexBytes(c.spanId);
  const ts = c.traceState?.serialize();
  if (ts) {
    u32(0x1a);
    str(ts);
  }
  if (l.attributes) attributes(l.attributes, 4);
  u32(0x28);
  u32(l.droppedAttributesCount || 0);
  u32(0x35);
  fixed32(flags(c.traceFlags, c.isRemote));
  end(at);
}

function span(s: ReadableSpan): void {
  u32(0x12);
  const at = begin();
  const ctx: SpanContext = s.spanContext();
  u32(0x0a);
  hexBytes(ctx.traceId);
  u32(0x12);
  hexBytes(ctx.spanId);
  const ts = ctx.traceState?.serialize();
  if (ts) {
    u32(0x1a);
    str(ts);
  }
  const parent = s.parentSpanContext;
  if (parent?.spanId) {
    u32(0x22);
    hexBytes(parent.spanId);
  }
  u32(0x2a);
  str(s.name);
  const kind = s.kind == null ? 0 : s.kind + 1;
  if (kind !== 0) {
    u32(0x30);
    u32(kind);
  }
  u32(0x39);
  time(s.startTime);
  u32(0x41);
  time(s.endTime);
  if (s.attributes) attributes(s.attributes, 9);
  u32(0x50);
  u32(s.droppedAttributesCount);
  for (const e of s.events) event(e);
  u32(0x60);
  u32(s.droppedEventsCount);
  for (const l of s.links) link(l);
  u32(0x70);
  u32(s.droppedLinksCount);
  // status (field 15): its message when there is one, its code always.
  u32(0x7a);
  const statusAt = begin();
  if (s.status.message) {
    u32(0x12);
    str(s.status.message);
  }
  u32(0x18);
  u32(s.status.code);
  end(statusAt);
  // flags (field 16, fixed32): tag 133, two bytes as a varint.
  u32((16 << 3) | 5);
  fixed32(flags(ctx.traceFlags, parent?.isRemote));
  end(at);
}

/** The encoded `resource` field (1) of a ResourceSpans, by resource object (once its attributes are settled). */
const resources = new WeakMap<Resource, Buffer>();
/** The encoded `scope` field (1) of a ScopeSpans, by scope object. */
const scopes = new WeakMap<Scope, Buffer>();

function cached<K extends object>(map: WeakMap<K, Buffer>, k: K, write: () => void, keep: boolean): void {
  const b = map.get(k);
  if (b !== undefined) {
    ensure(b.length);
    buf.set(b, pos);
    pos += b.length;
    return;
  }
  const start = pos;
  write();
  if (keep) map.set(k, Buffer.from(buf.subarray(start, pos)));
}

function resource(r: Resource): void {
  u32(0x0a);
  const at = begin();
  if (r.attributes) attributes(r.attributes, 1);
  u32(0x10);
  u32(0);
  end(at);
}

function scope(sc: Scope): void {
  u32(0x0a);
  const at = begin();
  u32(0x0a);
  str(sc.name);
  if (sc.version) {
    u32(0x12);
    str(sc.version);
  }
  const scAttributes = (sc as { attributes?: Record<string, AttributeValue> }).attributes;
  if (scAttributes) attributes(scAttributes, 3);
  const dropped = (sc as { droppedAttributesCount?: number }).droppedAttributesCount;
  if (dropped) {
    u32(0x20);
    u32(dropped);
  }
  end(at);
}

/** Span buffers of batches already made into requests, for the next batches (at most a few: one group per batch in practice). */
const spareBuffers: Buffer[] = [];
const MAX_SPARE_BUFFERS = 4;

/** One (resource, scope) group's encoded `Span` fields (each with its tag and length), back to back. */
interface SpanBytes {
  bytes: Buffer;
  length: number;
}

/**
 * Spans encoded one at a time, as they end (src/lib/otlp-span-processor.ts), grouped by resource, then by scope, in
 * order of first appearance (as the SDK's serializer groups them); {@link bytes} makes them one
 * `ExportTraceServiceRequest`. What is kept of a span is its bytes: the span object itself can die young.
 */
export class EncodedSpans {
  /** How many spans were added. */
  count = 0;
  private readonly groups = new Map<Resource, Map<Scope, SpanBytes>>();
  /** The request, once made. */
  private out: Uint8Array | undefined;
  /** The group of the last span added (one resource and one scope in practice: no lookup). */
  private last: { resource: Resource; scope: Scope; group: SpanBytes } | undefined;

  add(s: ReadableSpan): void {
    const group = this.groupOf(s.resource, s.instrumentationScope);
    // Encoded straight into the group's bytes (the writer's buffer is the group's while it writes; grown as needed).
    const scratch = buf;
    buf = group.bytes;
    pos = group.length;
    try {
      span(s);
      group.length = pos;
    } finally {
      group.bytes = buf;
      buf = scratch;
    }
    this.count++;
  }

  private groupOf(r: Resource, sc: Scope): SpanBytes {
    const last = this.last;
    if (last !== undefined && last.resource === r && last.scope === sc) return last.group;
    let byScope = this.groups.get(r);
    if (!byScope) this.groups.set(r, (byScope = new Map()));
    let group = byScope.get(sc);
    if (!group) byScope.set(sc, (group = { bytes: spareBuffers.pop() ?? Buffer.allocUnsafe(16 * 1024), length: 0 }));
    this.last = { resource: r, scope: sc, group };
    return group;
  }

  /** The spans' resources whose attributes are still being detected (to wait for before {@link bytes}). */
  pendingResources(): Resource[] {
    return [...this.groups.keys()].filter((r) => r.asyncAttributesPending);
  }

  /**
   * The spans as the bytes of one OTLP `ExportTraceServiceRequest` (a copy: the encoder's buffer is reused). Once
   * called, the spans' own buffers go back for the next batches (grown to a batch's size once, not every batch).
   */
  bytes(): Uint8Array {
    if (this.out !== undefined) return this.out;
    pos = 0;
    for (const [r, byScope] of this.groups) {
      u32(0x0a);
      const rsAt = begin();
      cached(resources, r, () => resource(r), !r.asyncAttributesPending);
      for (const [sc, group] of byScope) {
        u32(0x12);
        const ssAt = begin();
        cached(scopes, sc, () => scope(sc), true);
        ensure(group.length);
        group.bytes.copy(buf, pos, 0, group.length);
        pos += group.length;
        if (sc.schemaUrl) {
          u32(0x1a);
          str(sc.schemaUrl);
        }
        end(ssAt);
      }
      if (r.schemaUrl) {
        u32(0x1a);
        str(r.schemaUrl);
      }
      end(rsAt);
    }
    // Every byte is written next: no zero-filling first.
    const out = Buffer.allocUnsafeSlow(pos);
    buf.copy(out, 0, 0, pos);
    // A very large export does not keep its buffer.
    if (buf.length > 4 * 1024 * 1024) buf = Buffer.allocUnsafe(64 * 1024);
    for (const byScope of this.groups.values()) {
      for (const group of byScope.values()) if (spareBuffers.length < MAX_SPARE_BUFFERS && group.bytes.length <= 4 * 1024 * 1024) spareBuffers.push(group.bytes);
    }
    this.groups.clear();
    this.last = undefined;
    this.out = out;
    return out;
  }
}

/** `spans` as the bytes of one OTLP `ExportTraceServiceRequest`. */
export function encodeTraceRequest(spans: readonly ReadableSpan[]): Uint8Array {
  const encoded = new EncodedSpans();
  for (const s of spans) encoded.add(s);
  return encoded.bytes();
}
