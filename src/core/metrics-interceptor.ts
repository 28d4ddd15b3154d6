import { ConnectError, type Interceptor } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type { Metrics } from "../lib/metrics.js";

/**
 * Records RPC duration (to the response, or to the first message of a stream) by procedure and code; the code is
 * "ok" or the gRPC status name in Connect's spelling ("unauthenticated", "resource_exhausted"), "unknown" for
 * an error that is not a ConnectError. The duration is the histogram's `startTimer`'s (process.hrtime's, in
 * seconds), taken without its closure and label objects; each method's procedure name is made once.
 */
export function createMetricsInterceptor(metrics: Metrics): Interceptor {
  const procedures = new WeakMap<DescMethod, string>();
  const procedureOf = (method: DescMethod, typeName: string): string => {
    let p = procedures.get(method);
    if (p === undefined) procedures.set(method, (p = `${typeName}/${method.name}`));
    return p;
  };
  const seconds = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e9;
  return (next) => async (req) => {
    const procedure = procedureOf(req.method, req.service.typeName);
    const start = process.hrtime.bigint();
    try {
      const res = await next(req);
      metrics.rpcDuration.observe({ procedure, code: "ok" }, seconds(start));
      return res;
    } catch (err) {
      metrics.rpcDuration.observe({ procedure, code: err instanceof ConnectError ? codeToString(err.code) : "unknown" }, seconds(start));
      throw err;
    }
  };
}
