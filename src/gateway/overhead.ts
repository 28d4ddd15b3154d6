/**
 * Portico's own time for a model call, as every model route reports it (docs/chat.md, "Overhead"): the time since the
 * request arrived minus `upstreamMs`, the core's time waiting on providers. Observed in `portico_overhead_seconds`
 * under the route and the provider that served (`none` when none did) and returned as the header's value.
 */
import type { FastifyReply } from "fastify";
import { OVERHEAD_HEADER } from "../contract/overhead.js";
import type { GatewayContext } from "./context.js";

/** The `route` label of each model route. */
export const OVERHEAD_ROUTES = {
  chat: "/api/v1/chat/completions",
  messages: "/api/v1/messages",
  responses: "/api/v1/responses",
  gemini: "/api/v1beta/models",
  embeddings: "/api/v1/embeddings",
} as const;

export type OverheadRoute = (typeof OVERHEAD_ROUTES)[keyof typeof OVERHEAD_ROUTES];

/** The header's value (milliseconds, three decimals), observed in the histogram on the way. */
export function overheadMs(ctx: GatewayContext, reply: FastifyReply, route: OverheadRoute, upstreamMs: number, provider: string): string {
  const ms = Math.max(0, reply.elapsedTime - upstreamMs);
  ctx.metrics.overhead.observe({ route, provider: provider || "none" }, ms / 1000);
  return millisText(ms);
}

/**
 * `ms.toFixed(3)` for every request's header: `toFixed` takes V8's exact decimal path (≈ 0.4 % of serve's CPU at c=32;
 * bench/README.md, "serve's CPU per non-streamed request"). For 0 ≤ ms < 1e7 the thousandths are `ms × 1000` rounded,
 * which is the exact value's rounding unless that product lies within 1e-5 of a half (its error is below 2e-6 there):
 * those, and anything else, go to `toFixed`.
 */
export function millisText(ms: number): string {
  if (ms >= 0 && ms < 1e7) {
    const x = ms * 1000;
    const whole = Math.floor(x);
    const rest = x - whole;
    if (Math.abs(rest - 0.5) > 1e-5) {
      const r = rest > 0.5 ? whole + 1 : whole;
      const int = Math.floor(r / 1000);
      const frac = r - int * 1000;
      return `${int}.${frac < 10 ? "00" : frac < 100 ? "0" : ""}${frac}`;
    }
  }
  return ms.toFixed(3);
}

/** `{x-portico-overhead-ms: …}` for a stream's opening headers. */
export function overheadHeaders(ctx: GatewayContext, reply: FastifyReply, route: OverheadRoute, upstreamMs: number, provider: string): Record<string, string> {
  return { [OVERHEAD_HEADER]: overheadMs(ctx, reply, route, upstreamMs, provider) };
}
