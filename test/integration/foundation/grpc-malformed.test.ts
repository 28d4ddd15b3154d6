/**
 * A request body that is not valid protobuf is INVALID_ARGUMENT on the gRPC port, not INTERNAL,
 * for unary and server-streaming methods; a valid call on the same connection still works.
 */
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

  it("leaves well-formed calls alone", async () => {
    const ok = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest("/portico.identity.v1.IdentityService/GetCaller", (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), bearer(h.tenant.apiKey), (e) => resolve(e)),
    );
    expect(ok).toBeNull();
  });
});
