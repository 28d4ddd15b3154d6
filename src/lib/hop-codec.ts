/**
 * The hop channel's two envelope messages (proto/portico/hop/v1/hop_service.proto) in protobuf binary, written and
 * read here rather than through protobuf-es's reflection: every unary call over the channel crosses four of them
 * (the call and its answer, encoded and decoded), and reflection with a map and two repeated messages cost more per
 * envelope than the rest of a call's framing. Output is the bytes `toBinary` writes (fields by number, zero values
 * left out, map entries and metadata in insertion order, a map entry's key and value written even when empty);
 * decoding accepts what any conforming writer sends (fields in any order, unknown fields skipped, the last of a
 * repeated scalar winning) and throws on malformed input.
 * Checked against the generated schema in test/unit/lib/hop-codec.test.ts.
 */

/** ExchangeRequest: one call, or (`cancel`) the cancellation of one. */
export interface HopCall {
  id: number;
  method: string;
  /** The request message, protobuf binary (a view into the received frame when decoded). */
  input: Uint8Array;
  timeoutMs: number;
  headers: Record<string, string>;
  cancel: boolean;
}

/** ExchangeResponse: one call's answer. Metadata as [name, value] pairs, in order. */
export interface HopReply {
  id: number;
  output: Uint8Array;
  headers: Array<[string, string]>;
  trailers: Array<[string, string]>;
  refused: boolean;
}

const EMPTY = new Uint8Array(0);

function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

/** A length-delimited field's size: tag (one byte: field numbers here are < 16), length, content. */
function lenFieldSize(len: number): number {
  return 1 + varintSize(len) + len;
}

function writeVarint(buf: Buffer, pos: number, n: number): number {
  while (n > 0x7f) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[pos++] = n;
  return pos;
}

function writeString(buf: Buffer, pos: number, tag: number, s: string, len: number): number {
  buf[pos++] = tag;
  pos = writeVarint(buf, pos, len);
  return pos + buf.write(s, pos, len, len === s.length ? "latin1" : "utf8");
}

/** UTF-8 length of `s`, and whether it is all ASCII (then one byte per code unit). */
function utf8Length(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, "utf8");
  return s.length;
}

/** `(field << 3) | wire type` for the fields written here. */
const T_ID = (1 << 3) | 0;
const T_METHOD = (2 << 3) | 2;
const T_INPUT = (3 << 3) | 2;
const T_TIMEOUT = (4 << 3) | 0;
const T_HEADERS = (5 << 3) | 2;
const T_CANCEL = (6 << 3) | 0;
const T_OUTPUT = (2 << 3) | 2;
const T_REPLY_HEADERS = (3 << 3) | 2;
const T_TRAILERS = (4 << 3) | 2;
const T_REFUSED = (5 << 3) | 0;
const T_KEY = (1 << 3) | 2;
const T_VALUE = (2 << 3) | 2;

/** A Metadata message's size: its empty fields left out, as for any message. */
function pairSize(klen: number, vlen: number): number {
  return (klen ? lenFieldSize(klen) : 0) + (vlen ? lenFieldSize(vlen) : 0);
}

/** A map entry's size: `toBinary` writes an entry's key and value even when empty. */
function entrySize(klen: number, vlen: number): number {
  return lenFieldSize(klen) + lenFieldSize(vlen);
}

function writePair(buf: Buffer, pos: number, tag: number, k: string, klen: number, v: string, vlen: number): number {
  buf[pos++] = tag;
  pos = writeVarint(buf, pos, pairSize(klen, vlen));
  if (klen) pos = writeString(buf, pos, T_KEY, k, klen);
  if (vlen) pos = writeString(buf, pos, T_VALUE, v, vlen);
  return pos;
}

function writeEntry(buf: Buffer, pos: number, tag: number, k: string, klen: number, v: string, vlen: number): number {
  buf[pos++] = tag;
  pos = writeVarint(buf, pos, entrySize(klen, vlen));
  pos = writeString(buf, pos, T_KEY, k, klen);
  return writeString(buf, pos, T_VALUE, v, vlen);
}

/** A gRPC message frame (5-byte prefix, uncompressed) of `size` bytes, the prefix written. */
function frameBuffer(size: number): Buffer {
  const buf = Buffer.allocUnsafe(5 + size);
  buf[0] = 0;
  buf.writeUInt32BE(size, 1);
  return buf;
}

/** A call as one gRPC message frame. */
export function encodeCallFrame(call: HopCall): Buffer {
  const methodLen = utf8Length(call.method);
  const keys = Object.keys(call.headers);
  const lens: number[] = [];
  let size = 0;
  if (call.id) size += 1 + varintSize(call.id);
  if (methodLen) size += lenFieldSize(methodLen);
  if (call.input.byteLength) size += lenFieldSize(call.input.byteLength);
  if (call.timeoutMs) size += 1 + varintSize(call.timeoutMs);
  for (const k of keys) {
    const klen = utf8Length(k);
    const vlen = utf8Length(call.headers[k]!);
    lens.push(klen, vlen);
    size += lenFieldSize(entrySize(klen, vlen));
  }
  if (call.cancel) size += 2;
  const buf = frameBuffer(size);
  let pos = 5;
  if (call.id) {
    buf[pos++] = T_ID;
    pos = writeVarint(buf, pos, call.id);
  }
  if (methodLen) pos = writeString(buf, pos, T_METHOD, call.method, methodLen);
  if (call.input.byteLength) {
    buf[pos++] = T_INPUT;
    pos = writeVarint(buf, pos, call.input.byteLength);
    buf.set(call.input, pos);
    pos += call.input.byteLength;
  }
  if (call.timeoutMs) {
    buf[pos++] = T_TIMEOUT;
    pos = writeVarint(buf, pos, call.timeoutMs);
  }
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    pos = writeEntry(buf, pos, T_HEADERS, k, lens[2 * i]!, call.headers[k]!, lens[2 * i + 1]!);
  }
  if (call.cancel) {
    buf[pos++] = T_CANCEL;
    buf[pos++] = 1;
  }
  return buf;
}

/** An answer as one gRPC message frame; `output` is written behind the envelope's fields without a copy of its own. */
export function encodeReplyFrame(reply: HopReply): Buffer {
  let size = 0;
  if (reply.id) size += 1 + varintSize(reply.id);
  if (reply.output.byteLength) size += lenFieldSize(reply.output.byteLength);
  const lens: number[] = [];
  for (const list of [reply.headers, reply.trailers]) {
    for (const [k, v] of list) {
      const klen = utf8Length(k);
      const vlen = utf8Length(v);
      lens.push(klen, vlen);
      size += lenFieldSize(pairSize(klen, vlen));
    }
  }
  if (reply.refused) size += 2;
  const buf = frameBuffer(size);
  let pos = 5;
  if (reply.id) {
    buf[pos++] = T_ID;
    pos = writeVarint(buf, pos, reply.id);
  }
  if (reply.output.byteLength) {
    buf[pos++] = T_OUTPUT;
    pos = writeVarint(buf, pos, reply.output.byteLength);
    buf.set(reply.output, pos);
    pos += reply.output.byteLength;
  }
  let i = 0;
  for (const [k, v] of reply.headers) pos = writePair(buf, pos, T_REPLY_HEADERS, k, lens[i++]!, v, lens[i++]!);
  for (const [k, v] of reply.trailers) pos = writePair(buf, pos, T_TRAILERS, k, lens[i++]!, v, lens[i++]!);
  if (reply.refused) {
    buf[pos++] = T_REFUSED;
    buf[pos++] = 1;
  }
  return buf;
}

/** A reader over one message: varints, lengths and skipping, each bounds-checked (a truncated message throws). */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  varint(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new Error("premature EOF");
      const b = this.buf[this.pos++]!;
      if (shift < 28) result |= (b & 0x7f) << shift;
      else if (shift < 35) result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) break;
      shift += 7;
      if (shift > 63) throw new Error("invalid varint");
    }
    // uint32 fields keep the low 32 bits, as protobuf-es reads them.
    return result >>> 0;
  }

  /**
   * A tag or a length: its whole varint value (one of 2^32 or more throws, rather than being read modulo 2^32 as
   * another field's tag or a shorter length).
   */
  u32(): number {
    if (this.pos < this.end && this.buf[this.pos]! < 0x80) return this.buf[this.pos++]!;
    let n = 0;
    for (let shift = 0; ; shift += 7) {
      if (shift > 63) throw new Error("invalid varint");
      if (this.pos >= this.end) throw new Error("premature EOF");
      const b = this.buf[this.pos++]!;
      if (shift < 35) n += (b & 0x7f) * 2 ** shift;
      else if (b & 0x7f) n = Infinity;
      if ((b & 0x80) === 0) break;
    }
    if (n > 0xffffffff) throw new Error("varint overflows uint32");
    return n;
  }

  /** A bool: true when any of the varint's 64 bits is set (a writer may send any non-zero value, as uint64 reads). */
  bool(): boolean {
    let bits = 0;
    for (let shift = 0; ; shift += 7) {
      if (shift > 63) throw new Error("invalid varint");
      if (this.pos >= this.end) throw new Error("premature EOF");
      const b = this.buf[this.pos++]!;
      // The tenth byte holds bit 63 only.
      bits |= shift < 63 ? b & 0x7f : b & 1;
      if ((b & 0x80) === 0) return bits !== 0;
    }
  }

  /** A length-delimited field's bounds. */
  span(): [number, number] {
    const len = this.u32();
    const start = this.pos;
    if (len > this.end - start) throw new Error("premature EOF");
    this.pos = start + len;
    return [start, start + len];
  }

  string(): string {
    const [s, e] = this.span();
    return this.buf.toString("utf8", s, e);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.pos += 8;
        break;
      case 2:
        this.span();
        return;
      case 5:
        this.pos += 4;
        break;
      default:
        throw new Error(`cannot skip wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new Error("premature EOF");
  }

  /** A map entry or Metadata message: its fields 1 and 2 as strings. */
  pair(): [string, string] {
    const [s, e] = this.span();
    const r = new Reader(this.buf, s, e);
    let k = "";
    let v = "";
    while (r.pos < e) {
      const tag = r.u32();
      const no = tag >>> 3;
      const wt = tag & 7;
      if (no === 1 && wt === 2) k = r.string();
      else if (no === 2 && wt === 2) v = r.string();
      else if (no === 0) throw new Error("invalid field number 0");
      else r.skip(wt);
    }
    return [k, v];
  }
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** An ExchangeRequest from its bytes (`input` a view into them). */
export function decodeCall(bytes: Uint8Array): HopCall {
  const buf = asBuffer(bytes);
  const r = new Reader(buf, 0, buf.length);
  const call: HopCall = { id: 0, method: "", input: EMPTY, timeoutMs: 0, headers: {}, cancel: false };
  while (r.pos < r.end) {
    const tag = r.u32();
    const wt = tag & 7;
    switch (tag) {
      case T_ID:
        call.id = r.varint();
        break;
      case T_METHOD:
        call.method = r.string();
        break;
      case T_INPUT: {
        const [s, e] = r.span();
        call.input = buf.subarray(s, e);
        break;
      }
      case T_TIMEOUT:
        call.timeoutMs = r.varint();
        break;
      case T_HEADERS: {
        const [k, v] = r.pair();
        call.headers[k] = v;
        break;
      }
      case T_CANCEL:
        call.cancel = r.bool();
        break;
      default:
        if (tag >>> 3 === 0) throw new Error("invalid field number 0");
        r.skip(wt);
    }
  }
  return call;
}

/** An ExchangeResponse from its bytes (`output` a view into them). */
export function decodeReply(bytes: Uint8Array): HopReply {
  const buf = asBuffer(bytes);
  const r = new Reader(buf, 0, buf.length);
  const reply: HopReply = { id: 0, output: EMPTY, headers: [], trailers: [], refused: false };
  while (r.pos < r.end) {
    const tag = r.u32();
    const wt = tag & 7;
    switch (tag) {
      case T_ID:
        reply.id = r.varint();
        break;
      case T_OUTPUT: {
        const [s, e] = r.span();
        reply.output = buf.subarray(s, e);
        break;
      }
      case T_REPLY_HEADERS:
        reply.headers.push(r.pair());
        break;
      case T_TRAILERS:
        reply.trailers.push(r.pair());
        break;
      case T_REFUSED:
        reply.refused = r.bool();
        break;
      default:
        if (tag >>> 3 === 0) throw new Error("invalid field number 0");
        r.skip(wt);
    }
  }
  return reply;
}
