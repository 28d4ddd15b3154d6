import type { Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import type { Metrics } from "../lib/metrics.js";
import type { SseRelay } from "./sse-relay.js";

/** What gateway routes need: a transport to the core and presentation settings. */
export interface GatewayContext {
  transport: Transport;
  logger: Logger;
  metrics: Metrics;
  /** Word used in place of a brand, e.g. "service" in `service.provide_input`. */
  brand: string;
  /** The one relay of core streams to server-sent events (every streaming route). */
  relay: SseRelay;
  /** A streaming answer opens after this long without its first chunk (then keepalive comments follow). */
  streamOpenAfterMs: number;
  /** The core is over the wire (GatewayOptions.coreOverTheWire): chat and dialect (Messages, Responses, Gemini) bodies go to it as their JSON text (`body_json`), not as a Struct. */
  jsonBodies: boolean;
}
