/**
 * The headers that name a caller's session (docs/routing.md, "Sticky sessions"), in the order they are read:
 * the first present wins, and the body's `session_id` wins over all of them.
 *
 * - `x-session-id`: Portico's own (the API description).
 * - `x-claude-code-session-id`: Claude Code sends it on every request since v2.1.86 (one UUID per session).
 * - `session-id`, then `session_id`: the Codex CLI's (hyphenated in current releases, underscored in older ones).
 * - `x-opencode-session`: what opencode sends its own gateway (one stable id per conversation).
 * - `x-session-affinity`: the generic affinity header some clients and proxies send.
 */
export const SESSION_HEADERS = ["x-session-id", "x-claude-code-session-id", "session-id", "session_id", "x-opencode-session", "x-session-affinity"] as const;
