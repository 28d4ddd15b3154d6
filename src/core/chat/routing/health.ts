/**
 * What the chat routing keeps in the health memory (src/lib/health-memory.ts; docs/routing.md, "The health
 * memory"): one store of "this key is cooling until T", with two kinds of keys.
 *
 * - A credential (`credentialKey`) that answered 429 is cooled: the execute stage skips it until the cool-down
 *   ends, and when every candidate was refused or skipped so, the caller gets 429 with the soonest end as
 *   `Retry-After`. A 503 carrying the provider's wait cools it too (the provider said when to come back).
 * - An endpoint (`endpointKey`: provider + provider model id) that failed with an outage (no response, a
 *   timeout, 408, a 5xx) is cooled: the plan stage orders it after the healthy ones (it is still tried, last).
 *
 * The provider's wait (`Retry-After`, `retry-after-ms`) is the cool-down when it gave one; otherwise the
 * growing step. A success forgets the failures of both the credential and the endpoint that served.
 */
import type { HealthMemory } from "../../../lib/health-memory.js";

export type { HealthMemory } from "../../../lib/health-memory.js";

/** The key of a credential (a BYOK credential's or a shared provider key's id). */
export function credentialKey(credentialId: string): string {
  return `credential:${credentialId}`;
}

/** The key of an endpoint: a provider serving one of its models. */
export function endpointKey(provider: string, upstreamModel: string): string {
  return `endpoint:${provider}:${upstreamModel}`;
}

/** Whether an upstream failure with this status (0: no response) counts against the endpoint's health. */
export function isOutage(status: number, timedOut = false): boolean {
  return timedOut || status === 0 || status === 408 || status >= 500;
}

/** What an attempt names: its credential and, when planned by the routing, its endpoint. */
export interface HealthSubject {
  credentialId: string;
  healthKey?: string | undefined;
}

/**
 * Records an attempt's upstream failure. Returns the end of the credential's cool-down when it was rate
 * limited (429): the caller's `Retry-After` when nothing else answers.
 */
export function noteFailure(
  memory: HealthMemory,
  a: HealthSubject,
  err: { status: number; timedOut?: boolean | undefined; retryAfterMs?: number | undefined },
): number | undefined {
  if (a.healthKey !== undefined && isOutage(err.status, err.timedOut === true)) memory.failed(a.healthKey, err.retryAfterMs);
  if (err.status === 429) return memory.failed(credentialKey(a.credentialId), err.retryAfterMs);
  if (err.status === 503 && err.retryAfterMs !== undefined) memory.failed(credentialKey(a.credentialId), err.retryAfterMs);
  return undefined;
}

/** Records that an attempt answered: its credential and endpoint are healthy. */
export function noteSuccess(memory: HealthMemory, a: HealthSubject): void {
  memory.succeeded(credentialKey(a.credentialId));
  if (a.healthKey !== undefined) memory.succeeded(a.healthKey);
}
