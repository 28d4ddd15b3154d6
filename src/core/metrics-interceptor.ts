import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import type { Metrics } from "../lib/metrics.js";

/**
 * Records RPC duration (to the response, or to the first message of a stream) by procedure and code; the code is
 * "ok" or the gRPC status name in Connect's spelling ("unauthenticated", "resource_exhausted"), "unknown" for
 * an error that is not a ConnectError.
 */
export function createMetricsInterceptor(metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const end = metrics.rpcDuration.startTimer({ procedure });
    try {
      const res = await next(req);
      end({ code: "ok" });
      return res;
    } catch (err) {
      end({ code: err instanceof ConnectError ? codeToString(err.code) : "unknown" });
      throw err;
    }
  };
}
