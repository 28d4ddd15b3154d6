import { describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { createDirectTransport } from "../../../src/core/direct-transport.js";
import { serviceError, errorDetailOf } from "../../../src/lib/service-error.js";
import { Reason } from "../../../src/contract/reasons.js";
import { HealthService } from "../../../src/gen/portico/health/v1/health_service_pb.js";
import { IdentityService } from "../../../src/gen/portico/identity/v1/identity_service_pb.js";
import { InternsService } from "../../../src/gen/portico/interns/v1/interns_service_pb.js";

describe("direct in-process transport", () => {
  const seen: string[] = [];
  const interceptor: Interceptor = (next) => async (req) => {
    seen.push(`${req.method.name}:${req.header.get("authorization") ?? ""}`);
    return next(req);
  };
  const routes = (router: ConnectRouter) => {
    router.service(HealthService, { check: () => ({ ready: true, instanceId: "x" }) });
    router.service(IdentityService, {
      getCaller: () => {
        throw serviceError(Reason.FORBIDDEN, "nope", { field: "f" });
      },
    });
    router.service(InternsService, {
      async *streamChat(_req, ctx) {
        ctx.signal.addEventListener("abort", () => seen.push("handler saw abort"), { once: true });
        yield { model: "m", event: { case: "content", value: { text: "a" } } };
        // A silent run: the handler waits for its next event until the caller goes away.
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      },
    });
  };
  const transport = createDirectTransport(routes, [interceptor]);

  it("runs interceptors with the call's headers and completes partial responses into messages", async () => {
    const res = await createClient(HealthService, transport).check({}, { headers: { authorization: "Bearer k" } });
    expect(res.ready).toBe(true);
    expect(res.$typeName).toBe("portico.health.v1.CheckResponse");
    expect(seen).toContain("Check:Bearer k");
  });

  it("presents a plain record of headers as WHATWG Headers would: any case, trimmed, sorted when iterated", async () => {
    let got: Headers | undefined;
    const capture: Interceptor = (next) => async (req) => {
      got = req.header;
      return next(req);
    };
    const record = { "X-Request-Id": "r1", Authorization: "Bearer k ", "x-session-id": "s" };
    await createClient(HealthService, createDirectTransport(routes, [capture])).check({}, { headers: record });
    const whatwg = new Headers(record);
    for (const name of ["authorization", "AUTHORIZATION", "x-request-id", "x-session-id", "x-absent"]) {
      expect(got!.get(name)).toBe(whatwg.get(name));
      expect(got!.has(name)).toBe(whatwg.has(name));
    }
    expect([...got!]).toEqual([...whatwg]);
    expect(new Headers(got!).get("authorization")).toBe("Bearer k");
  });

  it("passes ConnectErrors with their details through unchanged", async () => {
    const err = await createClient(IdentityService, transport)
      .getCaller({})
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
    expect(errorDetailOf(err as ConnectError)?.field).toBe("f");
  });

  it("answers Unimplemented for a service it does not serve", async () => {
    const routesWithout = createDirectTransport(() => undefined, []);
    const err = await createClient(HealthService, routesWithout).check({}).catch((e: unknown) => e);
    expect((err as ConnectError).code).toBe(Code.Unimplemented);
  });

  it("aborts the handler's signal when the caller aborts while the handler waits", async () => {
    const ac = new AbortController();
    const stream = createClient(InternsService, transport).streamChat({ internId: "i" }, { signal: ac.signal });
    const it = stream[Symbol.asyncIterator]();
    expect((await it.next()).value?.event.case).toBe("content");
    const pending = it.next().catch((e: unknown) => e);
    ac.abort();
    await pending;
    expect(seen).toContain("handler saw abort");
  });

  it("gives the caller the headers and trailers a handler set, unary and streaming, with the interceptors composed once for every call", async () => {
    const withHeaders = createDirectTransport(
      (router) => {
        router.service(HealthService, {
          check: (_req, ctx) => {
            ctx.responseHeader.set("x-unary", "1");
            ctx.responseTrailer.set("x-unary-trailer", "2");
            return { ready: true, instanceId: ctx.requestHeader.get("x-n") ?? "" };
          },
        });
        router.service(InternsService, {
          async *streamChat(_req, ctx) {
            ctx.responseHeader.set("x-stream", "3");
            yield { model: "m", event: { case: "content", value: { text: "a" } } };
          },
        });
      },
      [interceptor],
    );
    const headers: string[] = [];
    for (const n of ["a", "b"]) {
      const res = await createClient(HealthService, withHeaders).check(
        {},
        { headers: { "x-n": n }, onHeader: (h) => headers.push(`${n}:${h.get("x-unary")}`), onTrailer: (t) => headers.push(`${n}:${t.get("x-unary-trailer")}`) },
      );
      expect(res.instanceId).toBe(n);
    }
    expect(headers).toEqual(["a:1", "a:2", "b:1", "b:2"]);
    // A streaming handler runs once the stream is read: the header object the caller got is the one it fills.
    let header: Headers | undefined;
    const streamed: string[] = [];
    for await (const msg of createClient(InternsService, withHeaders).streamChat({ internId: "i" }, { onHeader: (h) => (header = h) })) {
      streamed.push(msg.event.case ?? "");
    }
    expect(streamed).toEqual(["content"]);
    expect(header?.get("x-stream")).toBe("3");
  });
});
