import { ConnectError, type Interceptor } from "@connectrpc/connect";
import type { Metrics } from "../lib/metrics.js";

/** Records RPC duration (to the response, or to the first message of a stream) by procedure and code. */
export function createMetricsInterceptor(metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const end = metrics.rpcDuration.startTimer({ procedure });
    try {
      const res = await next(req);
      end({ code: "ok" });
      return res;
    } catch (err) {
      end({ code: err instanceof ConnectError ? String(err.code) : "unknown" });
      throw err;
    }
  };
}
