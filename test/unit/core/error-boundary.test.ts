/**
 * The core's error boundary: what a handler throws becomes an error the caller may see. A database that cannot
 * hand out a connection or start a transaction in time is overload (503, retryable, Retry-After), not a 500,
 * and is not reported as an unexpected error; anything unknown is a bare 500 and is reported.
 */
import { Code, ConnectError, type UnaryRequest } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createErrorBoundaryInterceptor } from "../../../src/core/auth.js";
import { errorDetailOf } from "../../../src/core/errors.js";

function run(thrown: unknown) {
  const reported: unknown[] = [];
  const interceptor = createErrorBoundaryInterceptor((err) => reported.push(err));
  const handler = interceptor(async () => {
    throw thrown;
  });
  const req = { url: "/portico.test.v1.T/M", header: new Headers(), stream: false } as unknown as UnaryRequest;
  return handler(req).then(
    () => ({ error: undefined as ConnectError | undefined, reported }),
    (error: ConnectError) => ({ error, reported }),
  );
}

describe("core error boundary", () => {
  for (const code of ["P2028", "P2024"]) {
    it(`answers a busy database (${code}) with 503 core_unavailable, Retry-After 1, unreported`, async () => {
      const err = Object.assign(new Error("Transaction API error: Unable to start a transaction in the given time."), { code });
      const { error, reported } = await run(err);
      expect(error).toBeInstanceOf(ConnectError);
      expect(error!.code).toBe(Code.Unavailable);
      const detail = errorDetailOf(error!);
      expect(detail?.retryable).toBe(true);
      expect(detail?.retryAfterSeconds).toBe(1);
      expect(error!.rawMessage).not.toMatch(/Transaction API|P20/);
      expect(reported).toEqual([]);
    });
  }

  // What a PostgreSQL restart threw at handlers in the chaos test (test/e2e/chaos/outage.test.ts), each a 500 before.
  const unreachable: Array<[string, Error]> = [
    ["P1001", Object.assign(new Error("Invalid `prisma.intern.findUnique()` invocation:\n\nCan't reach database server at 127.0.0.1:5432"), { code: "P1001" })],
    ["P2010 raw query", Object.assign(new Error("Raw query failed. Code: `N/A`. Message: `Can't reach database server at 127.0.0.1:5432`"), { code: "P2010" })],
    ["P2010 closed", Object.assign(new Error("Raw query failed. Code: `N/A`. Message: `Server has closed the connection.`"), { code: "P2010" })],
    ["P2010 starting up", Object.assign(new Error("Raw query failed. Code: `57P03`. Message: `the database system is starting up`"), { code: "P2010" })],
    ["adapter, 57P01", Object.assign(new Error("terminating connection due to administrator command"), { name: "DriverAdapterError" })],
    ["pg client", new Error("Client has encountered a connection error and is not queryable")],
  ];
  for (const [what, err] of unreachable) {
    it(`answers an unreachable database (${what}) with 503 core_unavailable, Retry-After 1, unreported`, async () => {
      const { error, reported } = await run(err);
      expect(error!.code).toBe(Code.Unavailable);
      expect(errorDetailOf(error!)?.retryAfterSeconds).toBe(1);
      expect(error!.rawMessage).not.toMatch(/127\.0\.0\.1|Raw query|57P0/);
      expect(reported).toEqual([]);
    });
  }

  it("keeps other failures a bare, reported 500", async () => {
    const { error, reported } = await run(Object.assign(new Error("boom"), { code: "P2002" }));
    expect(error!.code).toBe(Code.Internal);
    expect(error!.rawMessage).toBe("Internal Server Error");
    expect(reported).toHaveLength(1);
  });
});
