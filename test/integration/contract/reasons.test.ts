/**
 * Every value of the contract's Reason enum, raised by a core handler with the core's error
 * constructor, travels over real gRPC (HTTP/2) to the gateway and comes out with the table's gRPC
 * code, HTTP status and envelope; docs/api.md lists the same table.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fastify, type FastifyInstance } from "fastify";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { ConnectError, createClient, type ConnectRouter } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ALL_REASONS, Reason, reasonTableMarkdown, ruleOf } from "../../../src/contract/reasons.js";
import { serviceError, errorDetailOf } from "../../../src/lib/service-error.js";
import { IdentityService } from "../../../src/gen/portico/identity/v1/identity_service_pb.js";
import { buildGateway } from "../../../src/gateway/app.js";
import { reasonForStatus } from "../../../src/gateway/errors.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { createLogger } from "../../../src/log.js";

/** The core under test raises the reason named by the bearer token (its enum number); the gateway forwards Authorization. */
const routes = (router: ConnectRouter) => {
  router.service(IdentityService, {
    getCaller: (_req, ctx) => {
      const reason = Number(/^Bearer (\d+)$/.exec(ctx.requestHeader.get("authorization") ?? "")?.[1]) as Reason;
      throw serviceError(reason, `message of ${Reason[reason]}`, { field: "some.field", retryAfterSeconds: 7 });
    },
    // GET /api/v1/key judges credentials first on an input error (`authorizeFirst`): this core accepts every caller,
    // so the error getCaller raised is the one the gateway answers.
    authorize: () => ({}),
  });
};

describe("error reasons: one table from core to gateway", () => {
  let core: FastifyInstance;
  let gateway: FastifyInstance;
  let coreUrl: string;
  let gatewayUrl: string;

  beforeAll(async () => {
    core = fastify({ http2: true }) as unknown as FastifyInstance;
    const sessions = new Set<import("node:http2").Http2Session>();
    core.server.on("session", (session: import("node:http2").Http2Session) => {
      sessions.add(session);
      session.on("close", () => sessions.delete(session));
    });
    core.addHook("preClose", async () => {
      for (const session of sessions) session.destroy();
    });
    await core.register(fastifyConnectPlugin, { routes });
    await core.listen({ host: "127.0.0.1", port: 0 });
    coreUrl = `http://127.0.0.1:${(core.server.address() as { port: number }).port}`;
    gateway = await buildGateway({
      transport: createGrpcTransport({ baseUrl: coreUrl }),
      logger: createLogger({ level: "silent" }),
      metrics: createMetrics(),
      bodyLimitBytes: 1024 * 1024,
      brand: "service",
    });
    await gateway.listen({ host: "127.0.0.1", port: 0 });
    gatewayUrl = `http://127.0.0.1:${(gateway.server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await gateway?.close();
    await core?.close();
  });

  it("the enum and the table list the same reasons", () => {
    const enumValues = Object.values(Reason).filter((v): v is Reason => typeof v === "number" && v !== Reason.UNSPECIFIED);
    expect([...ALL_REASONS].sort((a, b) => a - b)).toEqual(enumValues.sort((a, b) => a - b));
    for (const r of ALL_REASONS) {
      const name = Reason[r].toLowerCase();
      // The wire string is the value's name, except for the two kinds of "busy" and of "conflict".
      const shared = r === Reason.SESSION_BUSY || r === Reason.HOST_BUSY ? "busy" : r === Reason.STATE_CONFLICT ? "conflict" : name;
      expect(ruleOf(r).wire).toBe(shared);
    }
  });

  for (const reason of ALL_REASONS.filter((r) => r !== Reason.UNSPECIFIED)) {
    const rule = ruleOf(reason);
    it(`${Reason[reason]} → gRPC ${rule.code}, HTTP ${rule.status} "${rule.wire}"`, async () => {
      // gRPC: the code and the detail as a gRPC client sees them.
      const grpcErr = await createClient(IdentityService, createGrpcTransport({ baseUrl: coreUrl }))
        .getCaller({}, { headers: { authorization: `Bearer ${reason}` } })
        .catch((e: unknown) => e);
      expect(grpcErr).toBeInstanceOf(ConnectError);
      expect((grpcErr as ConnectError).code).toBe(rule.code);
      const detail = errorDetailOf(grpcErr as ConnectError);
      expect(detail?.reason).toBe(rule.wire);
      expect(detail?.retryable).toBe(rule.retryable);

      // HTTP: the status and the envelope through the gateway.
      const res = await fetch(`${gatewayUrl}/api/v1/key`, { headers: { authorization: `Bearer ${reason}` } });
      expect(res.status).toBe(rule.status);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const body = (await res.json()) as { error: { code: number; message: string; metadata?: Record<string, unknown> } };
      expect(body.error.code).toBe(rule.status);
      expect(body.error.message).toBe(`message of ${Reason[reason]}`);
      if (rule.hideMetadata) expect(body.error.metadata).toBeUndefined();
      else expect(body.error.metadata).toEqual({ reason: rule.wire, retryable: rule.retryable, field: "some.field" });
      expect(res.headers.get("retry-after")).toBe("7");
    });
  }

  it("errors the gateway raises itself carry the table's default reason for their status", () => {
    expect(reasonForStatus(400)).toBe("bad_request");
    expect(reasonForStatus(404)).toBe("not_found");
    expect(reasonForStatus(413)).toBe("payload_too_large");
    expect(reasonForStatus(429)).toBe("rate_limited");
    expect(reasonForStatus(500)).toBe("internal_error");
    expect(reasonForStatus(503)).toBe("internal_error");
    expect(reasonForStatus(414)).toBe("bad_request");
  });

  it("docs/api.md lists the table", () => {
    const doc = readFileSync(new URL("../../../docs/api.md", import.meta.url), "utf8");
    const section = /<!-- reasons:begin -->\n([\s\S]*?)<!-- reasons:end -->/.exec(doc)?.[1];
    expect(section).toBe(reasonTableMarkdown());
  });
});
