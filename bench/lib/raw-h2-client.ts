/**
 * A PROTOTYPE of a unary gRPC client on a bare `net.Socket` speaking HTTP/2 itself (no node:http2), for the benches
 * only: how much of the split hop's client-side CPU is Node's HTTP/2 layer (stream objects, header mapping, nghttp2
 * through the JS binding) rather than the exchange itself (bench/hop-floor.ts `--raw`; bench/README.md, "The split hop
 * item by item", where it was also wired into the gateway's transport for an experiment). Not a client to ship: no
 * TLS, no CONTINUATION frames, no padding, no priority, the peer's flow-control windows not honoured (requests must
 * be small), no deadline, cancel or error mapping, and HPACK strings the server Huffman-encoded are kept as their
 * encoded bytes (the dynamic table's sizes then count encoded lengths; a steady exchange's response headers and
 * trailers are all indexed references, so this decodes a literal only when a value changes, e.g. `date` once a
 * second); so the status is read as the trailers' field whose value is `0`. Requests: `:method POST` and `:scheme
 * http` from HPACK's static table, the constant headers indexed once in the dynamic table, the others literal without
 * indexing (header values < 127 bytes). A loop turn's requests go out in one write (corked until `setImmediate`:
 * uncorking on `nextTick` wrote once per call and cost the core what the gateway saved).
 */
import net from "node:net";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const DATA = 0, HEADERS = 1, RST_STREAM = 3, SETTINGS = 4, PING = 6, GOAWAY = 7;
const END_STREAM = 1, END_HEADERS = 4, ACK = 1;
const WINDOW = 1 << 30;

/** HPACK's static table (RFC 7541, appendix A), index 1..61. */
const STATIC: Array<[string, string]> = [
  [":authority", ""], [":method", "GET"], [":method", "POST"], [":path", "/"], [":path", "/index.html"], [":scheme", "http"], [":scheme", "https"],
  [":status", "200"], [":status", "204"], [":status", "206"], [":status", "304"], [":status", "400"], [":status", "404"], [":status", "500"],
  ["accept-charset", ""], ["accept-encoding", "gzip, deflate"], ["accept-language", ""], ["accept-ranges", ""], ["accept", ""],
  ["access-control-allow-origin", ""], ["age", ""], ["allow", ""], ["authorization", ""], ["cache-control", ""], ["content-disposition", ""],
  ["content-encoding", ""], ["content-language", ""], ["content-length", ""], ["content-location", ""], ["content-range", ""], ["content-type", ""],
  ["cookie", ""], ["date", ""], ["etag", ""], ["expect", ""], ["expires", ""], ["from", ""], ["host", ""], ["if-match", ""],
  ["if-modified-since", ""], ["if-none-match", ""], ["if-range", ""], ["if-unmodified-since", ""], ["last-modified", ""], ["link", ""],
  ["location", ""], ["max-forwards", ""], ["proxy-authenticate", ""], ["proxy-authorization", ""], ["range", ""], ["referer", ""],
  ["refresh", ""], ["retry-after", ""], ["server", ""], ["set-cookie", ""], ["strict-transport-security", ""], ["transfer-encoding", ""],
  ["user-agent", ""], ["vary", ""], ["via", ""], ["www-authenticate", ""],
];

function frameHeader(len: number, type: number, flags: number, id: number): Buffer {
  const b = Buffer.allocUnsafe(9);
  b.writeUIntBE(len, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(id, 5);
  return b;
}

const INDEXED_NAMES = new Set([":authority", ":path", "content-type", "te", "user-agent", "grpc-accept-encoding"]);

function int(out: number[], v: number, prefix: number, first: number): void {
  const max = (1 << prefix) - 1;
  if (v < max) return void out.push(first | v);
  out.push(first | max);
  v -= max;
  while (v >= 128) {
    out.push((v & 127) | 128);
    v >>= 7;
  }
  out.push(v);
}

/** An HPACK encoder: `:method POST` and `:scheme http` from the static table, the constant headers into the dynamic table once, others literal without indexing. */
class Encoder {
  #inserted = 0;
  #at = new Map<string, number>();
  #size = 0;
  encode(headers: Record<string, string>): Buffer {
    const out: number[] = [];
    for (const k of Object.keys(headers)) {
      const v = String(headers[k]);
      if (k === ":method" && v === "POST") { out.push(0x83); continue; }
      if (k === ":scheme" && v === "http") { out.push(0x86); continue; }
      const key = `${k}\0${v}`;
      const at = this.#at.get(key);
      if (at !== undefined) { int(out, this.#inserted - at + 62, 7, 0x80); continue; }
      const lit = (first: number, prefix: number) => {
        int(out, 0, prefix, first);
        const kb = Buffer.from(k, "latin1");
        int(out, kb.length, 7, 0);
        for (const b of kb) out.push(b);
        const vb = Buffer.from(v, "latin1");
        int(out, vb.length, 7, 0);
        for (const b of vb) out.push(b);
      };
      const size = k.length + v.length + 32;
      if (INDEXED_NAMES.has(k) && this.#size + size <= 4000) {
        lit(0x40, 6);
        this.#inserted++;
        this.#at.set(key, this.#inserted);
        this.#size += size;
      } else lit(0, 4);
    }
    return Buffer.from(out);
  }
}

class Decoder {
  #dyn: Array<[string, string]> = [];
  #size = 0;
  #max = 4096;
  #int(b: Buffer, pos: { i: number }, prefix: number): number {
    const mask = (1 << prefix) - 1;
    let v = b[pos.i++]! & mask;
    if (v < mask) return v;
    let m = 0;
    let byte: number;
    do {
      byte = b[pos.i++]!;
      v += (byte & 127) << m;
      m += 7;
    } while (byte & 128);
    return v;
  }
  #str(b: Buffer, pos: { i: number }): string {
    const n = this.#int(b, pos, 7);
    const s = b.toString("latin1", pos.i, pos.i + n); // Huffman-encoded strings kept as they are (a prototype's shortcut)
    pos.i += n;
    return s;
  }
  #entry(i: number): [string, string] {
    return i <= 61 ? STATIC[i - 1]! : this.#dyn[i - 62]!;
  }
  #add(k: string, v: string): void {
    this.#dyn.unshift([k, v]);
    this.#size += k.length + v.length + 32;
    while (this.#size > this.#max) {
      const [ek, ev] = this.#dyn.pop()!;
      this.#size -= ek.length + ev.length + 32;
    }
  }
  /** Calls `on(name, value)` for each field of the block. */
  decode(b: Buffer, on: (k: string, v: string) => void): void {
    const pos = { i: 0 };
    while (pos.i < b.length) {
      const c = b[pos.i]!;
      if (c & 128) {
        const [k, v] = this.#entry(this.#int(b, pos, 7));
        on(k, v);
      } else if (c & 64) {
        const idx = this.#int(b, pos, 6);
        const k = idx ? this.#entry(idx)[0] : this.#str(b, pos);
        const v = this.#str(b, pos);
        this.#add(k, v);
        on(k, v);
      } else if (c & 32) {
        this.#max = this.#int(b, pos, 5);
      } else {
        const idx = this.#int(b, pos, 4);
        const k = idx ? this.#entry(idx)[0] : this.#str(b, pos);
        on(k, this.#str(b, pos));
      }
    }
  }
}

interface Pending {
  resolve(data: Buffer): void;
  reject(err: Error): void;
  status: string | undefined;
  data: Buffer | undefined;
}

/** One connection; `call()` sends a POST with `headers` and `body` (a gRPC frame) and resolves at grpc-status 0. */
export function rawH2Caller(port: number): (headers: Record<string, string>, body: Buffer) => Promise<Buffer> {
  const socket = net.connect(port, "127.0.0.1");
  socket.setNoDelay(true);
  const settings = Buffer.alloc(12);
  settings.writeUInt16BE(2, 0); // ENABLE_PUSH 0
  settings.writeUInt32BE(0, 2);
  settings.writeUInt16BE(4, 6); // INITIAL_WINDOW_SIZE
  settings.writeUInt32BE(WINDOW, 8);
  const wu = Buffer.alloc(4);
  wu.writeUInt32BE(WINDOW - 65535, 0);
  socket.write(Buffer.concat([PREFACE, frameHeader(12, SETTINGS, 0, 0), settings, frameHeader(4, 8, 0, 0), wu]));
  const decoder = new Decoder();
  const encoder = new Encoder();
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let buf: Buffer | undefined;
  let received = 0;
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  const fail = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  socket.on("error", fail);
  socket.on("close", () => fail(new Error("connection closed")));
  socket.on("data", (chunk: Buffer) => {
    let b = buf ? Buffer.concat([buf, chunk]) : chunk;
    let off = 0;
    while (b.length - off >= 9) {
      const len = b.readUIntBE(off, 3);
      if (b.length - off < 9 + len) break;
      const type = b[off + 3]!;
      const flags = b[off + 4]!;
      const id = b.readUInt32BE(off + 5) & 0x7fffffff;
      const payload = b.subarray(off + 9, off + 9 + len);
      off += 9 + len;
      if (type === DATA) {
        received += len;
        const p = pending.get(id);
        if (p) p.data = p.data ? Buffer.concat([p.data, payload]) : payload;
      } else if (type === HEADERS) {
        const p = pending.get(id);
        decoder.decode(payload, (k, v) => {
          // The name arrives Huffman-encoded (kept so here): the trailers' field whose value is "0" stands for it.
          if (p && flags & END_STREAM && (k === "grpc-status" || v === "0")) p.status = v;
        });
      } else if (type === SETTINGS) {
        if (!(flags & ACK)) socket.write(frameHeader(0, SETTINGS, ACK, 0));
      } else if (type === PING) {
        if (!(flags & ACK)) socket.write(Buffer.concat([frameHeader(8, PING, ACK, 0), payload]));
      } else if (type === RST_STREAM || type === GOAWAY) {
        const p = pending.get(id);
        pending.delete(id);
        p?.reject(new Error(`frame type ${type}`));
        if (type === GOAWAY) fail(new Error("GOAWAY"));
        continue;
      }
      if ((type === DATA || type === HEADERS) && flags & END_STREAM) {
        const p = pending.get(id);
        pending.delete(id);
        if (p) p.status === "0" ? p.resolve(p.data!) : p.reject(new Error(`grpc-status ${p.status}`));
      }
    }
    buf = off < b.length ? b.subarray(off) : undefined;
    if (received > WINDOW / 2) {
      const w = Buffer.alloc(4);
      w.writeUInt32BE(received, 0);
      received = 0;
      socket.write(Buffer.concat([frameHeader(4, 8, 0, 0), w]));
    }
  });
  return (headers, body) =>
    new Promise<Buffer>((resolve, reject) => {
      const block = encoder.encode(headers);
      const id = nextId;
      nextId += 2;
      pending.set(id, { resolve, reject, status: undefined, data: undefined });
      if (!corked) {
        corked = true;
        socket.cork();
        setImmediate(uncork);
      }
      socket.write(Buffer.concat([frameHeader(block.length, HEADERS, END_HEADERS, id), block, frameHeader(body.length, DATA, END_STREAM, id), body]));
    });
}
