/**
 * A real OTLP/HTTP trace receiver on loopback (`POST /v1/traces`), for tests of Portico's tracing: keeps every
 * export as received (content type, raw body) and, for OTLP/JSON (`http/json`), the spans flattened with their
 * resource's attributes. Answers as a collector does: 200 with an empty ExportTraceServiceResponse.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";

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
  /** Every span received as OTLP/JSON so far. */
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
