/**
 * The ACP SDK, loaded when the host starts its first agent process rather than at start-up: a core
 * with the embedded host that never runs an intern does not carry the SDK (and its schemas) in memory.
 * `loadAcp()` before the first agent process; `acpRuntime()` afterwards, from synchronous code.
 */
import type * as Acp from "@agentclientprotocol/sdk";

let loaded: typeof Acp | undefined;

export async function loadAcp(): Promise<typeof Acp> {
  loaded ??= await import("@agentclientprotocol/sdk");
  return loaded;
}

export function acpRuntime(): typeof Acp {
  if (!loaded) throw new Error("the ACP SDK is used before loadAcp() ran");
  return loaded;
}
