/**
 * A request message that is not valid protobuf is the caller's fault: INVALID_ARGUMENT (HTTP 400 in the
 * Connect protocol), not INTERNAL (HTTP 500).
 *
 * connect-es reports a binary decoding failure as `Code.Internal` ("parse binary: …") before any
 * interceptor runs, so the code is corrected in the response each handler of the router produces, for
 * the three protocols the core port speaks:
 * - gRPC: the `grpc-status` header (trailers-only response) or trailer;
 * - gRPC-Web: the trailer frame at the end of the body;
 * - Connect: the unary error body (and its HTTP status), or the end-of-stream frame of a stream.
 * (JSON decoding failures are already INVALID_ARGUMENT.)
 * It also re-encodes gRPC's `grpc-message` the way the gRPC spec does (see specGrpcMessage).
 */
import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";

const PARSE_FAILURE = "parse binary:";
const GRPC_INTERNAL = "13";
const GRPC_INVALID_ARGUMENT = "3";
/** Envelope flags: Connect end-of-stream, gRPC-Web trailer, compressed payload. */
const FLAG_END_STREAM = 0b10;
const FLAG_TRAILER = 0b1000_0000;
const FLAG_COMPRESSED = 0b1;

/** Replaces every handler of `router` by one whose parse failures answer INVALID_ARGUMENT. */
export function correctParseErrors(router: ConnectRouter): void {
  const handlers = router.handlers as UniversalHandler[];
  for (let i = 0; i < handlers.length; i++) {
    const inner = handlers[i]!;
    const outer = async (req: Parameters<UniversalHandler>[0]) => correctResponse(await inner(req));
    handlers[i] = Object.assign(outer, inner);
  }
}

function isParseFailure(code: string | undefined, message: unknown): boolean {
  return code === "internal" && typeof message === "string" && message.startsWith(PARSE_FAILURE);
}

/**
 * `grpc-message` percent-encoded as the gRPC spec asks: only bytes outside printable ASCII and `%` itself.
 * connect-es encodes with encodeURIComponent (`:` → `%3A`, `/` → `%2F`, `,` → `%2C`), and grpc-js decodes with
 * decodeURI, which leaves those escapes in: its users would read "workspace_id%3A must be…".
 */
function specGrpcMessage(headers: Headers | undefined): void {
  const raw = headers?.get("grpc-message");
  if (!raw || !raw.includes("%")) return;
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch {
    return;
  }
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  headers!.set("grpc-message", out);
}

function correctGrpcStatus(headers: Headers | undefined): void {
  specGrpcMessage(headers);
  if (!headers || headers.get("grpc-status") !== GRPC_INTERNAL) return;
  let message = headers.get("grpc-message") ?? "";
  try {
    message = decodeURIComponent(message);
  } catch {
    return;
  }
  if (message.startsWith(PARSE_FAILURE)) headers.set("grpc-status", GRPC_INVALID_ARGUMENT);
}

function envelope(flags: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.byteLength);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, payload.byteLength);
  out.set(payload, 5);
  return out;
}

/** A chunk that is exactly one envelope with one of `flags` set and not compressed: its payload. */
function soleEnvelope(chunk: Uint8Array, flags: number): Uint8Array | undefined {
  if (chunk.byteLength < 5 || (chunk[0]! & flags) === 0 || (chunk[0]! & FLAG_COMPRESSED) !== 0) return undefined;
  const length = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength).getUint32(1);
  return length === chunk.byteLength - 5 ? chunk.subarray(5) : undefined;
}

/** The corrected chunk, or the same chunk when it is not a parse failure's end of stream. */
function correctChunk(chunk: Uint8Array): Uint8Array {
  const trailer = soleEnvelope(chunk, FLAG_TRAILER);
  if (trailer) {
    const text = new TextDecoder().decode(trailer);
    const status = /^grpc-status: ?13\r?$/im;
    const message = /^grpc-message: ?(.*?)\r?$/im.exec(text)?.[1] ?? "";
    let decoded = "";
    try {
      decoded = decodeURIComponent(message);
    } catch {
      return chunk;
    }
    if (!status.test(text) || !decoded.startsWith(PARSE_FAILURE)) return chunk;
    return envelope(chunk[0]!, new TextEncoder().encode(text.replace(status, `grpc-status: ${GRPC_INVALID_ARGUMENT}`)));
  }
  const end = soleEnvelope(chunk, FLAG_END_STREAM);
  if (end) {
    try {
      const json = JSON.parse(new TextDecoder().decode(end)) as { error?: { code?: string; message?: unknown } };
      if (!json.error || !isParseFailure(json.error.code, json.error.message)) return chunk;
      json.error.code = "invalid_argument";
      return envelope(chunk[0]!, new TextEncoder().encode(JSON.stringify(json)));
    } catch {
      return chunk;
    }
  }
  return chunk;
}

async function correctResponse(res: UniversalServerResponse): Promise<UniversalServerResponse> {
  correctGrpcStatus(res.header);
  const contentType = res.header?.get("content-type") ?? "";
  // Connect unary error: one JSON body with the HTTP status of its code.
  if (res.status === 500 && contentType.startsWith("application/json") && !res.header?.has("content-encoding") && res.body) {
    const chunks: Uint8Array[] = [];
    for await (const c of res.body) chunks.push(c);
    const bytes = Buffer.concat(chunks);
    try {
      const json = JSON.parse(bytes.toString("utf8")) as { code?: string; message?: unknown };
      if (isParseFailure(json.code, json.message)) {
        const body = Buffer.from(JSON.stringify({ ...json, code: "invalid_argument" }));
        res.header?.set("content-length", String(body.byteLength));
        return { ...res, status: 400, body: once(body) };
      }
    } catch {
      // not a Connect error body: passed on unchanged
    }
    return { ...res, body: once(bytes) };
  }
  if (!res.body) return res;
  const body = res.body;
  return {
    ...res,
    body: (async function* () {
      for await (const chunk of body) yield correctChunk(chunk);
      correctGrpcStatus(res.trailer);
    })(),
  };
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
