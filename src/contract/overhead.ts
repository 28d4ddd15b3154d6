/**
 * Portico's own time for a chat request, made visible (docs/chat.md, "Overhead"): the response header the
 * gateway sets, and the response metadata (a gRPC trailer over the network) in which the core reports, with a
 * chat error, how long it waited on providers before it (a successful answer carries `upstream_ms`).
 */
export const OVERHEAD_HEADER = "x-portico-overhead-ms";
export const UPSTREAM_MS_METADATA = "x-portico-upstream-ms";
