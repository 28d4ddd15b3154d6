/**
 * The health memory of endpoints (docs/routing.md, "Load balancing"): an endpoint whose provider failed a call
 * with an outage (no connection, a timeout, a 5xx) is tried after the healthy ones for the next
 * ENDPOINT_HEALTH_MS. Kept in the credential cool-down store (cooldowns.ts) under the endpoint's health key,
 * so a store shared between instances shares it too. Rate limits (429) and refused credentials (401/403) are
 * not outages: they concern one credential, which the cool-downs already handle.
 */
import type { CredentialCooldowns } from "../cooldowns.js";

/** How long a failed endpoint goes last. */
export const ENDPOINT_HEALTH_MS = 30_000;

/** Whether an upstream failure with this status (0: no response) counts against the endpoint's health. */
export function isOutage(status: number, timedOut = false): boolean {
  return timedOut || status === 0 || status === 408 || status >= 500;
}

/** Records an attempt's failure against its endpoint when it was an outage. */
export function noteEndpointFailure(store: CredentialCooldowns, key: string | undefined, status: number, timedOut = false): void {
  if (key !== undefined && isOutage(status, timedOut)) store.coolDown(key, Date.now() + ENDPOINT_HEALTH_MS);
}
