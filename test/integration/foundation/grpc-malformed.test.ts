/**
 * A request body that is not valid protobuf is INVALID_ARGUMENT on the core port, not INTERNAL, for
 * unary and server-streaming methods, in the three protocols the port speaks (gRPC, gRPC-Web, and
 * Connect, where it is HTTP 400 `invalid_argument` rather than 500 `internal`); random garbage never
 * answers INTERNAL; a valid call on the same connection still works.
 */
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { bearer } from "../../helpers/grpc.js";

/** A message field 1 (length-delimited) claiming 100 bytes with 1 present: truncated protobuf. */
const GARBAGE = Buffer.from([0x0a, 0x64, 0x41]);

describe("malformed protobuf on the gRPC port", () => {
  let h: Harness;
  let client: grpc.Client;
  beforeAll(async () => {
    h = await startHarness();
    client = new grpc.Client(new URL(h.coreUrl).host, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    client?.close();
    await h?.close();
  });

  const raw = (method: string): Promise<grpc.ServiceError | undefined> =>
    new Promise((resolve) => {
      client.makeUnaryRequest(
        method,
        (b: Buffer) => b,
        (b: Buffer) => b,
        GARBAGE,
        bearer(h.tenant.managementKey),
        (err) => resolve(err ?? undefined),
      );
    });

  it("is INVALID_ARGUMENT for unary methods", async () => {
    for (const method of ["/portico.presets.v1.PresetsService/GetPreset", "/portico.byok.v1.ByokService/CreateByokCredential", "/portico.identity.v1.IdentityService/GetCaller"]) {
      const err = await raw(method);
      expect(err?.code, method).toBe(grpc.status.INVALID_ARGUMENT);
    }
  });

  it("is INVALID_ARGUMENT for a server-streaming method", async () => {
    const code = await new Promise<number>((resolve) => {
      const call = client.makeServerStreamRequest(
        "/portico.interns.v1.InternsService/StreamChat",
        (b: Buffer) => b,
        (b: Buffer) => b,
        GARBAGE,
        bearer(h.tenant.managementKey),
      );
      call.on("data", () => undefined);
      call.on("error", (e: grpc.ServiceError) => resolve(e.code));
      call.on("status", (s: grpc.StatusObject) => resolve(s.code));
    });
    expect(code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  const UNARY = [
    "/portico.presets.v1.PresetsService/GetPreset",
    "/portico.keys.v1.KeysService/CreateKey",
    "/portico.identity.v1.IdentityService/GetCaller",
    "/portico.workspaces.v1.WorkspacesService/ListWorkspaces",
    "/portico.internadmin.v1.InternAdminService/UpdateIntern",
    "/portico.byok.v1.ByokService/CreateByokCredential",
  ];

  it("never answers INTERNAL to random bytes over gRPC", async () => {
    const internal: string[] = [];
    for (let i = 0; i < 240; i++) {
      const method = UNARY[i % UNARY.length]!;
      const bytes = randomBytes(1 + (i % 48));
      const code = await new Promise<number>((resolve) =>
        client.makeUnaryRequest(method, (b: Buffer) => b, (b: Buffer) => b, bytes, bearer(h.tenant.managementKey), (e) => resolve(e?.code ?? grpc.status.OK)),
      );
      if (code === grpc.status.INTERNAL || code === grpc.status.UNKNOWN) internal.push(`${method} ${bytes.toString("hex")}`);
    }
    expect(internal).toEqual([]);
  });

  /** One HTTP/2 request to the core port; the status, headers and body. */
  const h2 = (path: string, contentType: string, body: Buffer): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const session = http2.connect(h.coreUrl);
      session.on("error", reject);
      const req = session.request({ ":method": "POST", ":path": path, "content-type": contentType, authorization: `Bearer ${h.tenant.managementKey}` });
      const chunks: Buffer[] = [];
      let headers: http2.IncomingHttpHeaders = {};
      req.on("response", (hd) => (headers = hd));
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("error", reject);
      req.on("end", () => {
        session.close();
        resolve({ status: Number(headers[":status"]), headers, body: Buffer.concat(chunks) });
      });
      req.end(body);
    });
  const envelope = (flags: number, payload: Buffer) => {
    const out = Buffer.concat([Buffer.from([flags]), Buffer.alloc(4), payload]);
    out.writeUInt32BE(payload.length, 1);
    return out;
  };

  it("is 400 invalid_argument in the Connect protocol (unary), never 500", async () => {
    for (const method of UNARY) {
      const res = await h2(method, "application/proto", GARBAGE);
      expect(res.status, method).toBe(400);
      expect(JSON.parse(res.body.toString()).code, method).toBe("invalid_argument");
    }
    const statuses = new Set<number>();
    for (let i = 0; i < 60; i++) statuses.add((await h2(UNARY[i % UNARY.length]!, "application/proto", randomBytes(1 + (i % 48)))).status);
    expect([...statuses].filter((s) => s >= 500)).toEqual([]);
  });

  it("is invalid_argument in the Connect protocol's end of stream for a server-streaming method", async () => {
    const res = await h2("/portico.interns.v1.InternsService/StreamChat", "application/connect+proto", envelope(0, GARBAGE));
    expect(res.status).toBe(200);
    const last = res.body.subarray(5);
    expect(res.body[0]! & 0b10).toBe(0b10);
    expect(JSON.parse(last.toString()).error.code).toBe("invalid_argument");
  });

  it("is grpc-status 3 in the gRPC-Web trailer", async () => {
    const res = await h2("/portico.identity.v1.IdentityService/GetCaller", "application/grpc-web+proto", envelope(0, GARBAGE));
    const status = res.headers["grpc-status"] ?? /grpc-status: ?(\d+)/.exec(res.body.toString("latin1"))?.[1];
    expect(String(status)).toBe("3");
  });

  it("leaves well-formed calls alone", async () => {
    const ok = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest("/portico.identity.v1.IdentityService/GetCaller", (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), bearer(h.tenant.apiKey), (e) => resolve(e)),
    );
    expect(ok).toBeNull();
  });
});
