/**
 * A real OTLP/HTTP trace receiver on loopback (`POST /v1/traces`), for tests of Portico's tracing: keeps every
 * export as received (content type, raw body) and the spans, flattened with their resource's attributes, of both
 * OTLP/JSON (`http/json`) and OTLP/protobuf (`http/protobuf`, decoded here field by field from opentelemetry-proto's
 * `trace/v1` schema with @bufbuild/protobuf's wire reader, independently of Portico's encoder). Answers as a
 * collector does: 200 with an empty ExportTraceServiceResponse.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

export type AttrValue = string | number | boolean | AttrValue[] | undefined;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttrValue>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  resource: Record<string, AttrValue>;
  scope: string;
}

export interface ReceivedExport {
  path: string;
  headers: IncomingHttpHeaders;
  contentType: string;
  body: Buffer;
}

export interface OtlpReceiver {
  /** http://127.0.0.1:<port> (the OTEL_EXPORTER_OTLP_ENDPOINT form; traces go to /v1/traces). */
  url: string;
  exports: ReceivedExport[];
  /** Every span received so far (OTLP/JSON or OTLP/protobuf). */
  spans: ReceivedSpan[];
  close(): Promise<void>;
}

interface JsonAnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: JsonAnyValue[] };
}

function valueOf(v: JsonAnyValue | undefined): AttrValue {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attrs(list: Array<{ key: string; value?: JsonAnyValue }> | undefined): Record<string, AttrValue> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
}

/** The fields of a protobuf message: field number → its values, in order (varints and fixed as numbers, length-delimited as bytes). */
function fields(bytes: Uint8Array): Map<number, Array<number | bigint | Uint8Array>> {
  const out = new Map<number, Array<number | bigint | Uint8Array>>();
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, type] = r.tag();
    let v: number | bigint | Uint8Array;
    if (type === WireType.Varint) v = BigInt(r.uint64());
    else if (type === WireType.Bit64) v = BigInt(r.fixed64());
    else if (type === WireType.Bit32) v = r.fixed32();
    else if (type === WireType.LengthDelimited) v = r.bytes();
    else throw new Error(`unexpected wire type ${type} for field ${no}`);
    out.set(no, [...(out.get(no) ?? []), v]);
  }
  return out;
}

const one = (f: Map<number, Array<number | bigint | Uint8Array>>, no: number) => f.get(no)?.at(-1);
const text = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString("utf8") : "");
const hexOf = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString("hex") : "");

/** An AnyValue message as a value. */
function protoValue(bytes: Uint8Array): AttrValue {
  const f = fields(bytes);
  if (f.has(1)) return text(one(f, 1));
  if (f.has(2)) return one(f, 2) === 1n;
  if (f.has(3)) return Number(BigInt.asIntN(64, one(f, 3) as bigint));
  if (f.has(4)) return new Float64Array(new BigUint64Array([one(f, 4) as bigint]).buffer)[0];
  if (f.has(5)) return (fields(one(f, 5) as Uint8Array).get(1) ?? []).map((v) => protoValue(v as Uint8Array));
  return undefined;
}

function protoAttributes(list: Array<number | bigint | Uint8Array> | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list ?? []) {
    const f = fields(kv as Uint8Array);
    const value = one(f, 2);
    out[text(one(f, 1))] = value instanceof Uint8Array ? protoValue(value) : undefined;
  }
  return out;
}

/** The spans of an ExportTraceServiceRequest in OTLP/protobuf. */
function protoSpans(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of fields(body).get(1) ?? []) {
    const rsf = fields(rs as Uint8Array);
    const res = one(rsf, 1);
    const resource = res instanceof Uint8Array ? protoAttributes(fields(res).get(1)) : {};
    for (const ss of rsf.get(2) ?? []) {
      const ssf = fields(ss as Uint8Array);
      const sc = one(ssf, 1);
      const scope = sc instanceof Uint8Array ? text(one(fields(sc), 1)) : "";
      for (const sp of ssf.get(2) ?? []) {
        const f = fields(sp as Uint8Array);
        const st = one(f, 15);
        const status = st instanceof Uint8Array ? fields(st) : new Map();
        spans.push({
          traceId: hexOf(one(f, 1)),
          spanId: hexOf(one(f, 2)),
          parentSpanId: hexOf(one(f, 4)),
          name: text(one(f, 5)),
          kind: Number(one(f, 6) ?? 0n),
          attributes: protoAttributes(f.get(9)),
          statusCode: Number(one(status, 3) ?? 0n),
          statusMessage: text(one(status, 2)),
          resource,
          scope,
        });
      }
    }
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: ReceivedExport[] = [];
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers["content-type"] ?? "");
      exports.push({ path: req.url ?? "", headers: req.headers, contentType, body });
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      if (contentType.startsWith("application/json")) {
        const doc = JSON.parse(body.toString("utf8")) as {
          resourceSpans?: Array<{
            resource?: { attributes?: Array<{ key: string; value?: JsonAnyValue }> };
            scopeSpans?: Array<{ scope?: { name?: string }; spans?: any[] }>;
          }>;
        };
        for (const rs of doc.resourceSpans ?? []) {
          const resource = attrs(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? "",
                name: s.name,
                kind: s.kind,
                attributes: attrs(s.attributes),
                statusCode: s.status?.code ?? 0,
                statusMessage: s.status?.message ?? "",
                resource,
                scope: ss.scope?.name ?? "",
              });
            }
          }
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
        return;
      }
      // http/protobuf: an empty ExportTraceServiceResponse is zero bytes.
      if (contentType.startsWith("application/x-protobuf")) spans.push(...protoSpans(body));
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    spans,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
